-- The collection tree's notifications to the token caches (migration 0200 sent 'c' for any
-- collection created, deleted or moved: every api process then read every principal's grants and
-- ReadAudit collection sets again) name the collections whose holders are concerned
-- (src/db/auth-changes.ts CacheDrop), sent at commit on channel svc_token_cache:
--   'c:<id>'  drop the kept grants and collection sets that hold collection <id>:
--             a collection created: its parent (grants reach down the tree, so only who holds the
--               parent gains it; a new root collection concerns no one: nothing is sent);
--             a collection moved: itself (who held it through its old ancestors loses it) and its
--               new parent (who holds that gains it);
--             a collection deleted: itself (also each one a foreign key's cascade deletes);
--   'c'       a truncate: every grant and collection set.
-- A collection renamed or otherwise updated in place sends nothing, as before.
create function token_cache_notify_collection() returns trigger language plpgsql as $$
begin
  if tg_op = 'INSERT' then
    if new.parent_collection_id is not null then
      perform pg_notify('svc_token_cache', 'c:' || new.parent_collection_id);
    end if;
  elsif tg_op = 'DELETE' then
    perform pg_notify('svc_token_cache', 'c:' || old.id);
  else
    perform pg_notify('svc_token_cache', 'c:' || new.id);
    if new.parent_collection_id is not null then
      perform pg_notify('svc_token_cache', 'c:' || new.parent_collection_id);
    end if;
  end if;
  return null;
end $$;

drop trigger collections_cache_insert_delete on collections;
drop trigger collections_cache_move on collections;
create trigger collections_cache_insert_delete after insert or delete on collections
  for each row execute function token_cache_notify_collection();
create trigger collections_cache_move after update of parent_collection_id on collections
  for each row when (old.parent_collection_id is distinct from new.parent_collection_id)
  execute function token_cache_notify_collection();
create trigger collections_cache_truncate after truncate on collections
  for each statement execute function token_cache_notify_collections();
