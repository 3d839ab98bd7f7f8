-- +goose Up
-- Drops the key table's index on updated_at. Every ordered write updates its key's row,
-- updated_at with it, and so wrote a new entry in that index (on PostgreSQL it also kept
-- the update from being HOT); purge reads the key table along its primary key instead.
DROP INDEX IF EXISTS "outbox_event_key_updated_idx";

-- +goose Down
-- Purge finds the key rows not written for the retention by updated_at.
CREATE INDEX IF NOT EXISTS "outbox_event_key_updated_idx" ON "outbox_event_key" (updated_at);
