-- The token caches' notifications name whom a change concerns (src/db/auth-changes.ts CacheDrop),
-- so a change of one principal no longer empties every api process's cache: until now a membership
-- added or removed, a user updated, a service account disabled, a grant changed or a principal
-- deleted sent 'g' (everything: every cached token is validated again, every principal's grants read
-- again). Now, sent at commit on channel svc_token_cache:
--   'u:<principal id>'  a principal changed in what the caches hold (0250's condition) or was
--                       deleted, its user or service-account row changed or was deleted, or it joined
--                       or left a group: drop its tokens, grants and collection sets;
--   'G:<group id>'      a grant of the group inserted or deleted: drop its members' grants (the
--                       caches keep each principal's groups with its grants) and the collection
--                       sets, tokens stay;
--   'g'                 a group renamed or re-scoped (its name and scope decide who is an
--                       administrator), an update or truncate of these tables: everything.
-- A group's other columns are kept nowhere: changing them sends nothing. A group or principal deleted
-- sends what the deletes of its memberships, grants and tokens send (row triggers fire for deletes
-- cascaded by a foreign key). PostgreSQL sends a transaction's identical notifications once.
create function token_cache_notify_principal() returns trigger language plpgsql as $$
begin
  perform pg_notify('svc_token_cache', 'u:' || (case when tg_op = 'DELETE' then old.id else new.id end));
  return null;
end $$;

-- users, service_accounts, group_members: the principal is principal_id
create function token_cache_notify_principal_of() returns trigger language plpgsql as $$
begin
  perform pg_notify('svc_token_cache', 'u:' || (case when tg_op = 'DELETE' then old.principal_id else new.principal_id end));
  return null;
end $$;

create function token_cache_notify_group_grants() returns trigger language plpgsql as $$
begin
  perform pg_notify('svc_token_cache', 'G:' || (case when tg_op = 'DELETE' then old.group_id else new.group_id end));
  return null;
end $$;

drop trigger principals_cache_update on principals;
drop trigger principals_cache_delete on principals;
create trigger principals_cache_update after update on principals for each row
  when ((to_jsonb(old) - 'last_synced_at' - 'external_subject' - 'settings' - 'settings_revision')
    is distinct from (to_jsonb(new) - 'last_synced_at' - 'external_subject' - 'settings' - 'settings_revision'))
  execute function token_cache_notify_principal();
create trigger principals_cache_delete after delete on principals
  for each row execute function token_cache_notify_principal();
create trigger principals_cache_truncate after truncate on principals
  for each statement execute function token_cache_notify_all();

drop trigger users_cache on users;
create trigger users_cache_update after update on users for each row
  when (old is distinct from new) execute function token_cache_notify_principal_of();
create trigger users_cache_delete after delete on users
  for each row execute function token_cache_notify_principal_of();
create trigger users_cache_truncate after truncate on users
  for each statement execute function token_cache_notify_all();

drop trigger service_accounts_cache on service_accounts;
create trigger service_accounts_cache_update after update on service_accounts for each row
  when (old is distinct from new) execute function token_cache_notify_principal_of();
create trigger service_accounts_cache_delete after delete on service_accounts
  for each row execute function token_cache_notify_principal_of();
create trigger service_accounts_cache_truncate after truncate on service_accounts
  for each statement execute function token_cache_notify_all();

drop trigger groups_cache_update on groups;
drop trigger groups_cache_delete on groups;
create trigger groups_cache_update after update on groups for each row
  when ((old.name, old.identity_scope) is distinct from (new.name, new.identity_scope))
  execute function token_cache_notify_all();
create trigger groups_cache_truncate after truncate on groups
  for each statement execute function token_cache_notify_all();

drop trigger group_members_cache_rows on group_members;
create trigger group_members_cache_rows after insert or delete on group_members
  for each row execute function token_cache_notify_principal_of();

drop trigger collection_permissions_cache_rows on collection_permissions;
create trigger collection_permissions_cache_rows after insert or delete on collection_permissions
  for each row execute function token_cache_notify_group_grants();
