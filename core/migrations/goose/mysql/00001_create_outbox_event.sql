-- +goose Up
-- The transactional outbox. status: 0 NEW, 1 DONE, 2 RETRY, 3 DEAD.
-- locked_by/locked_until hold a claim in MultiNode mode: the claim token (node ID/ULID)
-- and its expiry by the database clock. Outcome updates are fenced by the token.
-- Times are DATETIME(6) in UTC: connect with parseTime=true&loc=UTC.
-- event_id is VARBINARY so that IDs compare byte by byte, and the other text columns use
-- the case-sensitive utf8mb4_bin collation. On MariaDB, JSON is LONGTEXT with a JSON_VALID check.
-- The indexes are declared here because MySQL has no CREATE INDEX IF NOT EXISTS. MySQL has no
-- partial indexes either, so due_at and finished_at stand in for them: generated columns that
-- are NULL except on the rows their index is for.
-- pending_idx serves the poller's scan of due NEW/RETRY rows (due_at <= now), oldest first,
-- and the claim of MultiNode pollers, which walks it in order (due_at, created_at, event_id)
-- with FORCE INDEX so that its locking read locks only the rows it claims.
-- dead_idx serves ListDead and Replay, which walk DEAD rows in (created_at, event_id) order,
-- and Stats. It is the only index that starts with status.
-- finished_idx serves Purge, which deletes the oldest DONE/DEAD rows by finished_at,
-- COALESCE(done_at, created_at), in small batches.
CREATE TABLE IF NOT EXISTS `outbox_event` (
    event_id       VARBINARY(64) NOT NULL PRIMARY KEY,
    event_type     VARCHAR(128)  NOT NULL,
    aggregate_type VARCHAR(64)   NOT NULL,
    aggregate_id   VARCHAR(128)  NULL,
    tenant_id      VARCHAR(64)   NULL,
    payload        JSON          NOT NULL,
    headers        JSON          NULL,
    status         SMALLINT      NOT NULL DEFAULT 0,
    attempts       INTEGER       NOT NULL DEFAULT 0,
    last_error     TEXT          NULL,
    available_at   DATETIME(6)   NOT NULL,
    created_at     DATETIME(6)   NOT NULL,
    done_at        DATETIME(6)   NULL,
    locked_by      VARCHAR(128)  NULL,
    locked_until   DATETIME(6)   NULL,
    due_at         DATETIME(6)   AS (CASE WHEN status IN (0, 2) THEN available_at END) STORED,
    finished_at    DATETIME(6)   AS (CASE WHEN status IN (1, 3) THEN COALESCE(done_at, created_at) END) STORED,
    INDEX `outbox_event_pending_idx` (due_at, created_at),
    INDEX `outbox_event_dead_idx` (status, created_at, event_id),
    INDEX `outbox_event_finished_idx` (finished_at, event_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
-- Drops the table and its indexes.
DROP TABLE IF EXISTS `outbox_event`;
