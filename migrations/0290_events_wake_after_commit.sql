-- The fan-out workers' wake-up (NOTIFY svc_events) leaves the transactions that append audit events.
-- PostgreSQL serialises the commits of notifying transactions on one database-wide lock, held from
-- before commit until the commit's WAL is flushed, so with this trigger every transaction that
-- appended an event (an object create, any audited change) committed one after another, each
-- waiting for its own flush. The process that commits such a transaction now sends the NOTIFY
-- after the commit, in a statement of its own, one at a time (src/db/wakeups.ts); the workers
-- still poll (SVC_EVENT_FANOUT_POLL_INTERVAL_MS) for events inserted by anything else.
drop trigger events_notify on events;
drop function events_notify();
