-- Aggregate: the admin's lists of one aggregate's events (aggregate_id, then
-- creation order) read this index, whatever their status.
CREATE INDEX IF NOT EXISTS "outbox_event_aggregate_idx" ON "outbox_event" (aggregate_id, created_at, event_id) WHERE aggregate_id IS NOT NULL;
