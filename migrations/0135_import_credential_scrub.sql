-- Why: an import that carries human passwords stores their Argon2id hashes in tasks.request until
-- the worker applies them, and the worker removes them when it finishes. A task that ends without
-- the worker (cancelled while queued, refused before dispatch, failed by lease recovery) never
-- reached that step. This trigger removes the hashes whenever an import task reaches a terminal
-- status, whoever writes that status, so no finished import keeps credential material.
create function tasks_scrub_import_credentials() returns trigger language plpgsql as $$
begin
  if new.kind = 'import'
     and new.status in ('succeeded', 'failed', 'partially_succeeded', 'cancelled')
     and jsonb_typeof(new.request #> '{graph,principals}') = 'array'
     and jsonb_path_exists(new.request, '$.graph.principals[*].password_hash') then
    new.request := jsonb_set(new.request, '{graph,principals}', (
      select coalesce(jsonb_agg(
        case when jsonb_typeof(p) = 'object' and p ? 'password_hash'
          then (p - 'password_hash') || '{"password_removed": true}'::jsonb
          else p end
        order by ord), '[]'::jsonb)
      from jsonb_array_elements(new.request #> '{graph,principals}') with ordinality as e(p, ord)));
  end if;
  return new;
end $$;

create trigger tasks_scrub_import_credentials before insert or update of status on tasks
  for each row execute function tasks_scrub_import_credentials();
