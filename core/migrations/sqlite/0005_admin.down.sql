-- Drops the audit table and the aggregate and state indexes.
DROP TABLE IF EXISTS "outbox_event_audit";

DROP INDEX IF EXISTS "outbox_event_aggregate_idx";

DROP INDEX IF EXISTS "outbox_event_state_idx";
