-- Drops the lease table.
DROP TABLE IF EXISTS "outbox_event_lease";
