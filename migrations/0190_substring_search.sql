-- Substring matching of objects' names and descriptions: the list filters name__contains /
-- __icontains (and description's), and plain-text search, are LIKE / ILIKE '%…%' patterns (escaped
-- by src/db/list.ts); trigram GIN indexes let PostgreSQL answer them without reading every object of
-- a class. pg_trgm ships with PostgreSQL (contrib) and is a trusted extension: the database owner may
-- create it.
create extension if not exists pg_trgm;
create index objects_name_trgm_idx on objects using gin (name gin_trgm_ops);
create index objects_description_trgm_idx on objects using gin (description gin_trgm_ops);
