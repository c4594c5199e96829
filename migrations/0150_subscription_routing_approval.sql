-- Why: a subscription's routing chooses where an administrator's sink sends events (and its
-- secret, headers or mail server). Routing outside the sink's config.allowed_routing is approved
-- only when an unscoped administrator set it for that sink; this column records that approval so
-- the delivery worker can check it right before every send. It is true only when an unscoped
-- administrator wrote the routing or the sink of the subscription, and reset whenever anyone else
-- changes either. Rows written before this column existed cannot say who chose their routing:
-- collection subscriptions start unapproved (delivered only within the sink's allowed_routing until
-- an administrator saves their routing again); system subscriptions are written only by unscoped
-- administrators and start approved.
alter table event_subscriptions add column routing_admin_approved boolean not null default false;
update event_subscriptions set routing_admin_approved = true where collection_id is null;
