-- +goose Up
-- Ordering (docs/ordering.md): an ordered event has order_key and order_seq, its place
-- in its key, and is WAITING (status 4) until every earlier event of its key is finished.
ALTER TABLE "outbox_event" ADD COLUMN order_key VARCHAR(255) NULL;

ALTER TABLE "outbox_event" ADD COLUMN order_seq BIGINT NULL;

-- Order: the rows of a key that are not DONE, in order_seq order. Promote reads a key's
-- next WAITING row and what holds it from here. Partial, so unordered and DONE rows are
-- not in it.
CREATE INDEX IF NOT EXISTS "outbox_event_order_idx" ON "outbox_event" (order_key, order_seq) WHERE order_key IS NOT NULL AND status <> 1;

-- The key table: one row per order key, holding the key's counter. Writing an ordered
-- event updates its key's row, which locks it until the transaction ends, so that
-- transactions writing one key commit one after the other, numbered in that order.
-- Purge deletes rows of keys with nothing left to order.
CREATE TABLE IF NOT EXISTS "outbox_event_key" (
    order_key  VARCHAR(255) NOT NULL PRIMARY KEY,
    last_seq   BIGINT       NOT NULL,
    updated_at TEXT NOT NULL
);

-- Purge finds the key rows not written for the retention by updated_at.
CREATE INDEX IF NOT EXISTS "outbox_event_key_updated_idx" ON "outbox_event_key" (updated_at);

-- +goose Down
-- Drops the key table and the order columns and index.
DROP TABLE IF EXISTS "outbox_event_key";

DROP INDEX IF EXISTS "outbox_event_order_idx";

ALTER TABLE "outbox_event" DROP COLUMN order_seq;

ALTER TABLE "outbox_event" DROP COLUMN order_key;
