-- Fallback (docs/listeners.md): status 5 FALLBACK is an event whose listener failed for
-- good and whose fallback handled it. Statuses 5 and above are handled outcomes besides
-- DONE and DEAD: purged like them, and releasing their order key like DONE.
-- first_attempt_at is when the first failed attempt was recorded, for the fallback's
-- failure context; a replay clears it.
-- The indexes are rebuilt with the new conditions.
ALTER TABLE "outbox_event" ADD COLUMN first_attempt_at TIMESTAMPTZ NULL;

DROP INDEX IF EXISTS "outbox_event_finished_idx";

CREATE INDEX IF NOT EXISTS "outbox_event_finished_idx" ON "outbox_event" (COALESCE(done_at, created_at), event_id) WHERE status IN (1, 3) OR status >= 5;

DROP INDEX IF EXISTS "outbox_event_order_idx";

CREATE INDEX IF NOT EXISTS "outbox_event_order_idx" ON "outbox_event" (order_key, order_seq) WHERE order_key IS NOT NULL AND status <> 1 AND status < 5;
