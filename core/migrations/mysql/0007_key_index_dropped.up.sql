-- Drops the key table's index on updated_at. Every ordered write updates its key's row,
-- updated_at with it, and so wrote a new entry in that index (on PostgreSQL it also kept
-- the update from being HOT); purge reads the key table along its primary key instead.
ALTER TABLE `outbox_event_key` DROP INDEX `outbox_event_key_updated_idx`;
