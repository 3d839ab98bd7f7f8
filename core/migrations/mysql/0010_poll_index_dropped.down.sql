-- Adds the poll index and its column back.
ALTER TABLE `outbox_event` ADD COLUMN pending_created_at DATETIME(6) AS (CASE WHEN status IN (0, 2) THEN created_at END) STORED,
    ADD INDEX `outbox_event_poll_idx` (pending_created_at, event_id);
