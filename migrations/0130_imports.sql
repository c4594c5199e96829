-- Why: an import (task kind `import`) reports one outcome per graph item, served in processing
-- order and paginated by GET /api/v1/imports/{id}/results. The rows belong to their task and go
-- with it; `seq` is the item's position in processing order (the keyset of the list).

create table import_results (
  task_id integer not null references tasks (id) on delete cascade,
  seq integer not null check (seq >= 0),
  item_ref text not null,
  entity_kind text not null check (entity_kind in ('collection', 'class', 'object', 'class_relation', 'object_relation',
    'collection_permission', 'group', 'principal', 'group_membership', 'export_template', 'remote_target', 'event_sink',
    'event_subscription')),
  action text not null check (action in ('create', 'update', 'unchanged')),
  outcome text not null check (outcome in ('succeeded', 'failed', 'skipped', 'rolled_back')),
  error text,
  -- The row the item created or matched (diagnostics; not on the wire).
  entity_id integer,
  primary key (task_id, seq)
);
