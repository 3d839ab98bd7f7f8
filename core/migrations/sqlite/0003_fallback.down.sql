-- Restores the indexes of version 2 and drops first_attempt_at.
DROP INDEX IF EXISTS "outbox_event_finished_idx";

CREATE INDEX IF NOT EXISTS "outbox_event_finished_idx" ON "outbox_event" (COALESCE(done_at, created_at), event_id) WHERE +status IN (1, 3);

DROP INDEX IF EXISTS "outbox_event_order_idx";

CREATE INDEX IF NOT EXISTS "outbox_event_order_idx" ON "outbox_event" (order_key, order_seq) WHERE order_key IS NOT NULL AND status <> 1;

ALTER TABLE "outbox_event" DROP COLUMN first_attempt_at;
