-- The transactional outbox. status: 0 NEW, 1 DONE, 2 RETRY, 3 DEAD.
-- locked_by/locked_until hold a claim in MultiNode mode: the claim token (node ID/ULID)
-- and its expiry by the database clock. Outcome updates are fenced by the token.
CREATE TABLE IF NOT EXISTS "outbox_event" (
    event_id       VARCHAR(64)  NOT NULL PRIMARY KEY,
    event_type     VARCHAR(128) NOT NULL,
    aggregate_type VARCHAR(64)  NOT NULL,
    aggregate_id   VARCHAR(128) NULL,
    tenant_id      VARCHAR(64)  NULL,
    payload        JSONB        NOT NULL,
    headers        JSONB        NULL,
    status         SMALLINT     NOT NULL DEFAULT 0,
    attempts       INTEGER      NOT NULL DEFAULT 0,
    last_error     TEXT         NULL,
    available_at   TIMESTAMPTZ  NOT NULL,
    created_at     TIMESTAMPTZ  NOT NULL,
    done_at        TIMESTAMPTZ  NULL,
    locked_by      VARCHAR(128) NULL,
    locked_until   TIMESTAMPTZ  NULL
);

-- Pending: the poller's scan of due NEW/RETRY rows, oldest created_at first. The
-- scan walks the index in the query's order and stops after its LIMIT, skipping the
-- rows that are not due yet. Partial, so only NEW and RETRY rows are in it.
CREATE INDEX IF NOT EXISTS "outbox_event_pending_idx" ON "outbox_event" (created_at, event_id) WHERE status IN (0, 2);

-- Claim (MultiNode) walks due NEW/RETRY rows in its order, due longest first
-- (available_at, created_at, event_id), and stops after its LIMIT, skipping rows
-- that another node holds.
CREATE INDEX IF NOT EXISTS "outbox_event_claim_idx" ON "outbox_event" (available_at, created_at, event_id) WHERE status IN (0, 2);

-- ListDead and Replay walk DEAD rows in (created_at, event_id) keyset order.
-- Partial, so the DONE rows that make up most of the table are not in it.
CREATE INDEX IF NOT EXISTS "outbox_event_dead_idx" ON "outbox_event" (created_at, event_id) WHERE status = 3;

-- Purge deletes the oldest DONE/DEAD rows by COALESCE(done_at, created_at) in
-- small batches. The expression matches the purge query so each batch is an index
-- range scan instead of a sort of every finished row.
CREATE INDEX IF NOT EXISTS "outbox_event_finished_idx" ON "outbox_event" (COALESCE(done_at, created_at), event_id) WHERE status IN (1, 3);
