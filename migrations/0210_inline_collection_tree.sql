-- collection_ancestors() and collection_descendants() without STRICT, so PostgreSQL inlines them
-- into the statement that calls them. PostgreSQL never inlines a STRICT set-returning SQL function:
-- it ran as a function scan that planned its recursive query again at every execution, ~0.1 ms of
-- every point permission check (db/authz.ts grantExists: a non-administrator's getObject took
-- ~0.13 ms in the database where the inlined body takes ~0.02). The result is the same: a null id
-- matches no collection, so the body returns no rows, as STRICT did.
create or replace function collection_ancestors(cid integer) returns table (ancestor_id integer, depth integer)
language sql stable as $$
  with recursive up (ancestor_id, parent_id, depth) as (
    select c.id, c.parent_collection_id, 0 from collections c where c.id = cid
    union all
    select p.id, p.parent_collection_id, up.depth + 1
    from up join collections p on p.id = up.parent_id
    where up.depth < 10000
  )
  select ancestor_id, depth from up
$$;

create or replace function collection_descendants(cid integer) returns table (descendant_id integer, depth integer)
language sql stable as $$
  with recursive down (descendant_id, depth) as (
    select c.id, 0 from collections c where c.id = cid
    union all
    select c.id, down.depth + 1
    from down join collections c on c.parent_collection_id = down.descendant_id
    where down.depth < 10000
  )
  select descendant_id, depth from down
$$;
