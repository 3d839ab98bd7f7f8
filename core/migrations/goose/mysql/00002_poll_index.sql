-- +goose Up
-- Poll: the poller's scan of due NEW/RETRY rows walks poll_idx in its order,
-- oldest created_at first, and stops after its LIMIT, instead of sorting every due row
-- found by pending_idx. pending_created_at is created_at on NEW and RETRY rows and NULL
-- on the others, so the index holds only those. Adding a STORED column rebuilds the
-- table: on a large table, run it when the outbox is quiet.
ALTER TABLE `outbox_event` ADD COLUMN pending_created_at DATETIME(6) AS (CASE WHEN status IN (0, 2) THEN created_at END) STORED,
    ADD INDEX `outbox_event_poll_idx` (pending_created_at, event_id);

-- +goose Down
-- Drops the poll index and its column.
ALTER TABLE `outbox_event` DROP INDEX `outbox_event_poll_idx`, DROP COLUMN pending_created_at;
