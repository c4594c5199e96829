-- A group renamed or moved to another identity scope may make its members administrators or end
-- that (a group's name and scope decide who is one: SVC_ADMIN_GROUPNAME, SVC_ADMIN_IDENTITY_SCOPE).
-- Migrations 0250 and 0260 sent 'g' for it, which empties every api process's token cache; now each
-- member is named, as a membership change names it (src/db/auth-changes.ts CacheDrop):
--   'u:<principal id>'  for every member of the group renamed or re-scoped (nothing for an empty one).
-- 'g' is left to truncates and restores.
create function token_cache_notify_group_members() returns trigger language plpgsql as $$
begin
  perform pg_notify('svc_token_cache', 'u:' || gm.principal_id) from group_members gm where gm.group_id = new.id;
  return null;
end $$;

drop trigger groups_cache_update on groups;
create trigger groups_cache_update after update on groups for each row
  when ((old.name, old.identity_scope) is distinct from (new.name, new.identity_scope))
  execute function token_cache_notify_group_members();
