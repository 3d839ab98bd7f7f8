-- Drops the listener column.
ALTER TABLE "outbox_event" DROP COLUMN listener;
