-- The api processes' token caches also keep which collection each class is in (src/services/
-- token-cache.ts classCollection), so a list of a class's objects decides the caller's permission
-- on the class without a statement. A class deleted or moved to another collection changes that:
-- sent at commit on channel svc_token_cache, whatever made the change,
--   'k'  a class was deleted or moved: drop every cached class (tokens and grants stay cached).
-- (A class created needs nothing: it is read, then kept, at its first use.)
create function token_cache_notify_classes() returns trigger language plpgsql as $$
begin
  perform pg_notify('svc_token_cache', 'k');
  return null;
end $$;

create trigger classes_cache_delete after delete or truncate on classes
  for each statement execute function token_cache_notify_classes();
create trigger classes_cache_move after update of collection_id on classes
  for each statement execute function token_cache_notify_classes();
