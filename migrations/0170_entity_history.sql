-- Why: temporal history (#11). Every version of the versioned inventory entities (collections,
-- classes, objects, class and object relations, export templates, remote targets) is kept as the
-- full row in jsonb with its revision, the operation that produced it and the interval it was
-- current in: [valid_from, valid_to), valid_to null while it is current. Versions are written by
-- AFTER row triggers, so they commit or roll back with the change itself and no write path can
-- forget them. A deletion writes a tombstone (operation 'delete', the last row, revision + 1) that
-- stays current. valid_from is the transaction time (now(), as updated_at) in the milliseconds the
-- API shows timestamps in, so an instant read off a response selects the version it came from;
-- versions written twice in one transaction (or millisecond) leave a zero-length interval for the
-- earlier one, which no instant selects. A transaction that started before the one that wrote the
-- current version but changes the row after it never starts its version before that one. No-op updates (the row unchanged) write nothing. Users are not versioned.
--
-- The actor comes from transaction-local settings (svc.actor_kind, svc.actor_id,
-- svc.initiator_id, svc.task_id) that the service sets once per mutation transaction
-- (src/db/history.ts bindActor); a change made without them (migrations, manual SQL) is recorded
-- as the system. collection_id and class_id are the authorization attributes of the version (the
-- collection it lived in then), copied out of the row so that visibility filters in SQL.

create table entity_history (
  id bigint generated always as identity primary key,
  entity_kind text not null check (entity_kind in (
    'collection', 'class', 'object', 'class_relation', 'object_relation', 'export_template', 'remote_target')),
  entity_id integer not null,
  revision integer not null,
  operation text not null check (operation in ('insert', 'update', 'delete')),
  data jsonb not null,
  valid_from timestamptz not null,
  valid_to timestamptz,
  actor_kind text not null check (actor_kind in ('user', 'worker', 'system')),
  actor_principal_id integer,
  initiator_principal_id integer,
  task_id integer,
  collection_id integer,
  class_id integer,
  constraint entity_history_interval check (valid_to is null or valid_to >= valid_from)
);
-- One entity's versions, newest first; also the as-of lookup.
create index entity_history_entity_idx on entity_history (entity_kind, entity_id, id);
-- The current version of an entity (closed by the next change).
create unique index entity_history_current_key on entity_history (entity_kind, entity_id) where valid_to is null;
-- Retention: closed versions by age.
create index entity_history_closed_idx on entity_history (valid_to) where valid_to is not null;

create function entity_history_record() returns trigger language plpgsql as $$
declare
  kind text := tg_argv[0];
  r jsonb;
  rid integer;
  rev integer;
  op text := lower(tg_op);
  akind text := coalesce(nullif(current_setting('svc.actor_kind', true), ''), 'system');
  ts timestamptz := date_trunc('milliseconds', now());
  prev_end timestamptz;
begin
  if tg_op = 'UPDATE' then
    if old is not distinct from new then
      return null;
    end if;
  end if;
  if tg_op = 'DELETE' then
    r := to_jsonb(old);
    rid := old.id;
    rev := old.revision + 1;
  else
    r := to_jsonb(new);
    rid := new.id;
    rev := new.revision;
  end if;
  update entity_history set valid_to = greatest(ts, valid_from)
    where entity_kind = kind and entity_id = rid and valid_to is null
    returning valid_to into prev_end;
  insert into entity_history (entity_kind, entity_id, revision, operation, data, valid_from,
    actor_kind, actor_principal_id, initiator_principal_id, task_id, collection_id, class_id)
  values (kind, rid, rev, op, r, greatest(ts, coalesce(prev_end, ts)), akind,
    nullif(current_setting('svc.actor_id', true), '')::int,
    nullif(current_setting('svc.initiator_id', true), '')::int,
    nullif(current_setting('svc.task_id', true), '')::int,
    case when kind = 'collection' then rid else (r ->> 'collection_id')::int end,
    case kind when 'class' then rid when 'object' then (r ->> 'class_id')::int end);
  return null;
end $$;

create trigger collections_history after insert or update or delete on collections
  for each row execute function entity_history_record('collection');
create trigger classes_history after insert or update or delete on classes
  for each row execute function entity_history_record('class');
create trigger objects_history after insert or update or delete on objects
  for each row execute function entity_history_record('object');
create trigger class_relations_history after insert or update or delete on class_relations
  for each row execute function entity_history_record('class_relation');
create trigger object_relations_history after insert or update or delete on object_relations
  for each row execute function entity_history_record('object_relation');
create trigger export_templates_history after insert or update or delete on export_templates
  for each row execute function entity_history_record('export_template');
create trigger remote_targets_history after insert or update or delete on remote_targets
  for each row execute function entity_history_record('remote_target');

-- Entities that exist already get their current row as the first version (actor: system).
insert into entity_history (entity_kind, entity_id, revision, operation, data, valid_from, actor_kind, collection_id, class_id)
select 'collection', c.id, c.revision, 'insert', to_jsonb(c), date_trunc('milliseconds', c.updated_at), 'system', c.id, null from collections c
union all
select 'class', k.id, k.revision, 'insert', to_jsonb(k), date_trunc('milliseconds', k.updated_at), 'system', k.collection_id, k.id from classes k
union all
select 'object', o.id, o.revision, 'insert', to_jsonb(o), date_trunc('milliseconds', o.updated_at), 'system', o.collection_id, o.class_id from objects o
union all
select 'class_relation', cr.id, cr.revision, 'insert', to_jsonb(cr), date_trunc('milliseconds', cr.updated_at), 'system', null, null from class_relations cr
union all
select 'object_relation', r.id, r.revision, 'insert', to_jsonb(r), date_trunc('milliseconds', r.updated_at), 'system', null, null from object_relations r
union all
select 'export_template', t.id, t.revision, 'insert', to_jsonb(t), date_trunc('milliseconds', t.updated_at), 'system', t.collection_id, null from export_templates t
union all
select 'remote_target', t.id, t.revision, 'insert', to_jsonb(t), date_trunc('milliseconds', t.updated_at), 'system', t.collection_id, null from remote_targets t;
