-- The task workers' wake-up (NOTIFY svc_tasks) leaves the transactions that submit tasks, as the
-- fan-out workers' did in migration 0290: a notifying transaction's commit waits for every other
-- notifying commit (PostgreSQL holds one database-wide lock from before the commit until its WAL is
-- flushed). The process that commits a task's submission now sends the NOTIFY after the commit
-- (src/db/wakeups.ts); the workers still poll (SVC_TASK_POLL_INTERVAL_MS) for tasks inserted by
-- anything else.
drop trigger tasks_notify on tasks;
drop function tasks_notify();
