-- +goose Up
-- Drops the aggregate index. Every event with an aggregate ID wrote an entry in it, and
-- its DONE update another (an update that changes the status is never HOT): the lists
-- of one aggregate's events cost every write. outbox.MigrateAggregateIndex creates it
-- again, under another name, for those who list by aggregate.
DROP INDEX IF EXISTS "outbox_event_aggregate_idx";

-- +goose Down
-- Aggregate: the admin's lists of one aggregate's events (aggregate_id, then
-- creation order) read this index, whatever their status.
CREATE INDEX IF NOT EXISTS "outbox_event_aggregate_idx" ON "outbox_event" (aggregate_id, created_at, event_id) WHERE aggregate_id IS NOT NULL;
