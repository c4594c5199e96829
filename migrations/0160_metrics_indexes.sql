-- Why: /metrics reports dead deliveries by sink kind at every scrape. Dead rows are kept with the
-- succeeded ones (event_deliveries_terminal_idx covers both, by updated_at), so counting them read
-- every terminal row of the retention window; this partial index holds the dead rows alone.
create index event_deliveries_dead_idx on event_deliveries (sink_id) where status = 'dead';
