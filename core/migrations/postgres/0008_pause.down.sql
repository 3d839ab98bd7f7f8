-- Drops the pause table.
DROP TABLE IF EXISTS "outbox_event_pause";
