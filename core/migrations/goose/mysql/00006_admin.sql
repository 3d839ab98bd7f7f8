-- +goose Up
-- Audit trail: one row per change made through DeadEvents (the admin page and API,
-- the command-line tool): who, when, what and how many rows it changed. audit_id is a
-- ULID, so it sorts by time. Rows are kept until deleted by hand.
CREATE TABLE IF NOT EXISTS `outbox_event_audit` (
    audit_id VARBINARY(64) NOT NULL PRIMARY KEY,
    at       DATETIME(6)  NOT NULL,
    actor    VARCHAR(255) NOT NULL,
    action   VARCHAR(32)  NOT NULL,
    target   TEXT         NOT NULL,
    affected BIGINT       NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Aggregate: the admin's lists of one aggregate's events (aggregate_id, then
-- creation order) read this index, whatever their status.
-- The index comes last: it is what marks the version as applied.
ALTER TABLE `outbox_event` ADD INDEX `outbox_event_aggregate_idx` (aggregate_id, created_at, event_id);

-- +goose Down
-- Drops the aggregate index and the audit table.
ALTER TABLE `outbox_event` DROP INDEX `outbox_event_aggregate_idx`;

DROP TABLE IF EXISTS `outbox_event_audit`;
