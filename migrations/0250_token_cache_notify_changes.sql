-- The token caches (migration 0180) are emptied only by a statement that changes what they hold.
-- 0180's statement triggers fired for every statement on the table, whether it changed a row or not,
-- and for columns no cached value comes from: every directory sign-in emptied every api process's
-- cache, since it stamps the user's principal row (last_synced_at) and adds the user to each of its
-- directory groups with `insert … on conflict do nothing`, which fires the insert trigger when the
-- user already is a member; so did each directory group sync (it stamps the group row), a
-- membership added twice or removed when absent, and a user's settings saved. Now:
--   principals: a row whose columns other than last_synced_at, external_subject and the settings
--     changed (the cache keeps the principal's kind, name, scope, times and revision);
--   groups: a row whose columns other than the sync times changed;
--   group_members, collection_permissions: a row inserted or deleted (row triggers: PostgreSQL sends
--     a transaction's identical notifications once); an update or truncate, as before.
drop trigger principals_cache on principals;
create trigger principals_cache_update after update on principals for each row
  when ((to_jsonb(old) - 'last_synced_at' - 'external_subject' - 'settings' - 'settings_revision')
    is distinct from (to_jsonb(new) - 'last_synced_at' - 'external_subject' - 'settings' - 'settings_revision'))
  execute function token_cache_notify_all();
create trigger principals_cache_delete after delete or truncate on principals
  for each statement execute function token_cache_notify_all();

drop trigger groups_cache on groups;
create trigger groups_cache_update after update on groups for each row
  when ((to_jsonb(old) - 'last_sync_attempted_at' - 'last_sync_success_at')
    is distinct from (to_jsonb(new) - 'last_sync_attempted_at' - 'last_sync_success_at'))
  execute function token_cache_notify_all();
create trigger groups_cache_delete after delete or truncate on groups
  for each statement execute function token_cache_notify_all();

drop trigger group_members_cache on group_members;
create trigger group_members_cache_rows after insert or delete on group_members
  for each row execute function token_cache_notify_all();
create trigger group_members_cache after update or truncate on group_members
  for each statement execute function token_cache_notify_all();

drop trigger collection_permissions_cache on collection_permissions;
create trigger collection_permissions_cache_rows after insert or delete on collection_permissions
  for each row execute function token_cache_notify_all();
create trigger collection_permissions_cache after update or truncate on collection_permissions
  for each statement execute function token_cache_notify_all();
