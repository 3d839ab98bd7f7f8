-- Drops the poll index and its column.
ALTER TABLE `outbox_event` DROP INDEX `outbox_event_poll_idx`, DROP COLUMN pending_created_at;
