-- Drops the key table and the order columns and index.
DROP TABLE IF EXISTS "outbox_event_key";

DROP INDEX IF EXISTS "outbox_event_order_idx";

ALTER TABLE "outbox_event" DROP COLUMN order_seq;

ALTER TABLE "outbox_event" DROP COLUMN order_key;
