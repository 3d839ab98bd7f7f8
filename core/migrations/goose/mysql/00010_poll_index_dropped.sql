-- +goose Up
-- Drops the poll index and its column. The poller reads due NEW and RETRY rows in the
-- claim's order, due longest first (due_at, created_at, event_id), along pending_idx,
-- and so does the purge of undelivered rows; each NEW row cost an entry in both, and
-- the poller's walk of the poll index from the oldest row passed rows not due yet.
-- Dropping a STORED column rebuilds the table: on a large table, run it when the
-- outbox is quiet.
ALTER TABLE `outbox_event` DROP INDEX `outbox_event_poll_idx`, DROP COLUMN pending_created_at;

-- +goose Down
-- Adds the poll index and its column back.
ALTER TABLE `outbox_event` ADD COLUMN pending_created_at DATETIME(6) AS (CASE WHEN status IN (0, 2) THEN created_at END) STORED,
    ADD INDEX `outbox_event_poll_idx` (pending_created_at, event_id);
