-- Why: the event retention purge must survive failures between "decide what to delete",
-- "archive it" and "delete it". A claim fixes a batch id and the exact event documents before
-- anything is archived, so archiving is idempotent by batch id, a failed or interrupted run hands
-- the same batch to the next worker, and completion deletes exactly the claimed ids. Completed
-- batches stay as a small ledger without their documents.

create table event_retention_batches (
  batch_id uuid primary key,
  created_at timestamptz not null default now(),
  -- events older than this were eligible when the batch was claimed
  cutoff timestamptz not null,
  event_count integer not null check (event_count > 0),
  -- fencing: only the worker holding this token until locked_until may archive and complete
  claim_token uuid,
  locked_until timestamptz,
  attempts integer not null default 0 check (attempts >= 0),
  last_error text,
  archived_at timestamptz,
  completed_at timestamptz
);
create index event_retention_batches_open_idx on event_retention_batches (created_at) where completed_at is null;

create table event_retention_batch_events (
  batch_id uuid not null references event_retention_batches (batch_id) on delete cascade,
  -- events.id; no foreign key, the event row is deleted when the batch completes
  event_id bigint not null,
  -- the full event row as claimed (what the archive holds)
  document jsonb not null,
  primary key (batch_id, event_id)
);
-- An event belongs to at most one open batch.
create unique index event_retention_batch_events_event_key on event_retention_batch_events (event_id);
