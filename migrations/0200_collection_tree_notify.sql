-- The api processes' token caches also keep, per token, the collections its holder may read the
-- audit stream of (src/services/token-cache.ts collectionsWith). Grants reach down the collection
-- tree (db/authz.ts grantedCollectionIds), so a collection created, deleted or moved under another
-- changes those sets: sent at commit on channel svc_token_cache, whatever made the change,
--   'c'  the collection tree changed: drop every cached collection set (tokens stay cached).
-- (Grant, membership and principal changes already send 'g', which drops everything.)
create function token_cache_notify_collections() returns trigger language plpgsql as $$
begin
  perform pg_notify('svc_token_cache', 'c');
  return null;
end $$;

create trigger collections_cache_insert_delete after insert or delete or truncate on collections
  for each statement execute function token_cache_notify_collections();
create trigger collections_cache_move after update of parent_collection_id on collections
  for each statement execute function token_cache_notify_collections();
