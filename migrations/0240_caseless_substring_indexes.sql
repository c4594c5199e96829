-- Case-insensitive substring matches of objects' names and descriptions (__icontains,
-- __istartswith, __iendswith, plain-text search) are planned from statistics of their lowercase.
-- PostgreSQL estimates `name ILIKE p` by testing p against the column's 1,001 histogram bounds
-- (migration 0230), lowercasing the pattern and each bound for each test: ~0.65 ms of planning a
-- column at 1,000,000 objects, 1.4 ms for a plain-text search (both columns), which took ~0.5 ms to
-- run. src/db/list.ts writes these matches as `lower(name) LIKE lower(p)` instead (PostgreSQL's own
-- definition of ILIKE: both sides lowercased, then matched), which these indexes serve and whose
-- estimate tests p against bounds ANALYZE stored already lowercased (~0.17 ms, as a case-sensitive
-- LIKE); `lower(name) = lower(v)` (__iequals) uses them too. The case-sensitive indexes of
-- migration 0190 stay for LIKE, contains, endswith and regex. pg_trgm lowercases trigrams either
-- way, so the two indexes of a column hold the same trigrams; the price is their size and the
-- writes (measured: bench/FINDINGS.md, 2026-12-02). Building both took ~15–18 s at 1,000,000
-- objects of short names and descriptions (bench/large.ts's), then the ANALYZE; writes to objects
-- wait meanwhile.
create index objects_name_lower_trgm_idx on objects using gin (lower(name) gin_trgm_ops);
create index objects_description_lower_trgm_idx on objects using gin (lower(description) gin_trgm_ops);
-- 1,001 bounds, as the columns themselves (migration 0230): a fragment of a sampled name is then
-- estimated at 0.1 % of a class, not 1 %.
alter index objects_name_lower_trgm_idx alter column 1 set statistics 1000;
alter index objects_description_lower_trgm_idx alter column 1 set statistics 1000;
-- ANALYZE in the transaction that created the indexes (the migrations' one) still takes the default
-- target for their expressions (PostgreSQL 15 reads it from the index's descriptor as cached when
-- the index was built); from the next transaction on it takes 1,000. Hence the default for this run.
set local default_statistics_target = 1000;
analyze objects;
set local default_statistics_target to default;
