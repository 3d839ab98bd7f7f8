-- Pending: the poller's scan of due NEW/RETRY rows, oldest created_at first. The
-- scan walks the index in the query's order and stops after its LIMIT, skipping the
-- rows that are not due yet. Partial, so only NEW and RETRY rows are in it.
CREATE INDEX IF NOT EXISTS "outbox_event_pending_idx" ON "outbox_event" (created_at, event_id) WHERE status IN (0, 2);

DROP INDEX IF EXISTS "outbox_event_undelivered_idx";
