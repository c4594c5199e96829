-- Why: the audit read API (GET /api/v1/events) filters by actor, root initiator and task and pages
-- by id; without these the filters scan the whole append-only stream. Partial, because most rows
-- of each column are null (system and worker events, events outside tasks).
create index events_actor_user_idx on events (actor_user_id, id) where actor_user_id is not null;
create index events_initiator_user_idx on events (initiator_user_id, id) where initiator_user_id is not null;
create index events_task_idx on events (task_id, id) where task_id is not null;
