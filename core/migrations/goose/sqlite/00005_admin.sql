-- +goose Up
-- State: the admin's RETRY and WAITING lists walk these rows in (created_at,
-- event_id) keyset order. Partial, so NEW and finished rows are not in it.
CREATE INDEX IF NOT EXISTS "outbox_event_state_idx" ON "outbox_event" (status, created_at, event_id) WHERE status IN (2, 4);

-- Audit trail: one row per change made through DeadEvents (the admin page and API,
-- the command-line tool): who, when, what and how many rows it changed. audit_id is a
-- ULID, so it sorts by time. Rows are kept until deleted by hand.
CREATE TABLE IF NOT EXISTS "outbox_event_audit" (
    audit_id VARCHAR(64)   NOT NULL PRIMARY KEY,
    at       TEXT         NOT NULL,
    actor    VARCHAR(255) NOT NULL,
    action   VARCHAR(32)  NOT NULL,
    target   TEXT         NOT NULL,
    affected BIGINT       NOT NULL
);

-- Aggregate: the admin's lists of one aggregate's events (aggregate_id, then
-- creation order) read this index, whatever their status.
CREATE INDEX IF NOT EXISTS "outbox_event_aggregate_idx" ON "outbox_event" (aggregate_id, created_at, event_id) WHERE aggregate_id IS NOT NULL;

-- +goose Down
-- Drops the audit table and the aggregate and state indexes.
DROP TABLE IF EXISTS "outbox_event_audit";

DROP INDEX IF EXISTS "outbox_event_aggregate_idx";

DROP INDEX IF EXISTS "outbox_event_state_idx";
