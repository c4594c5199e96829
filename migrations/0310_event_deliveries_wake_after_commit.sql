-- The delivery workers' wake-up (NOTIFY svc_event_deliveries) leaves the fan-out transactions that
-- make deliveries, as the fan-out and task workers' did in migrations 0290 and 0300: a notifying
-- transaction's commit waits for every other notifying commit (PostgreSQL holds one database-wide
-- lock from before the commit until its WAL is flushed). The process that commits new or released
-- deliveries now sends the NOTIFY after the commit (src/db/wakeups.ts); the workers still poll
-- (SVC_EVENT_DELIVERY_POLL_INTERVAL_MS) for rows made by anything else.
drop trigger event_deliveries_notify on event_deliveries;
drop function event_deliveries_notify();
