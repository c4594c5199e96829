-- Invalidation of the api processes' token caches (src/services/token-cache.ts), sent at commit on
-- channel svc_token_cache whatever made the change (API, worker, CLI, a restore or plain SQL):
--   't:<id>'  a token changed (revoked, renamed, expiry or scope changed) or was deleted: drop it;
--             a change of last_used_at alone (the batched use writes) sends nothing;
--   'g'       a principal, user, group, membership, service account (disable) or permission
--             changed: drop every cached token (the simplest correct rule; these are rare).
create function token_cache_notify_token() returns trigger language plpgsql as $$
begin
  perform pg_notify('svc_token_cache', 't:' || old.id);
  return null;
end $$;

create function token_cache_notify_all() returns trigger language plpgsql as $$
begin
  perform pg_notify('svc_token_cache', 'g');
  return null;
end $$;

create trigger tokens_cache_update after update on tokens for each row
  when ((to_jsonb(old) - 'last_used_at') is distinct from (to_jsonb(new) - 'last_used_at'))
  execute function token_cache_notify_token();
create trigger tokens_cache_delete after delete on tokens for each row execute function token_cache_notify_token();
create trigger tokens_cache_truncate after truncate on tokens for each statement execute function token_cache_notify_all();

create trigger principals_cache after update or delete or truncate on principals
  for each statement execute function token_cache_notify_all();
create trigger users_cache after update or delete or truncate on users
  for each statement execute function token_cache_notify_all();
create trigger groups_cache after update or delete or truncate on groups
  for each statement execute function token_cache_notify_all();
create trigger group_members_cache after insert or update or delete or truncate on group_members
  for each statement execute function token_cache_notify_all();
create trigger service_accounts_cache after update or delete or truncate on service_accounts
  for each statement execute function token_cache_notify_all();
create trigger collection_permissions_cache after insert or update or delete or truncate on collection_permissions
  for each statement execute function token_cache_notify_all();
