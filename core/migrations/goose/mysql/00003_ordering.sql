-- +goose Up
-- The key table: one row per order key, holding the key's counter. Writing an ordered
-- event updates its key's row, which locks it until the transaction ends, so that
-- transactions writing one key commit one after the other, numbered in that order.
-- Purge deletes rows of keys with nothing left to order.
CREATE TABLE IF NOT EXISTS `outbox_event_key` (
    order_key  VARCHAR(255) NOT NULL PRIMARY KEY,
    last_seq   BIGINT       NOT NULL,
    updated_at DATETIME(6)  NOT NULL,
    INDEX `outbox_event_key_updated_idx` (updated_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Ordering (docs/ordering.md): an ordered event has order_key and order_seq, its place
-- in its key, and is WAITING (status 4) until every earlier event of its key is finished.
-- Order: the rows of a key that are not DONE, in order_seq order. Promote reads a key's
-- next WAITING row and what holds it from here. Partial, so unordered and DONE rows are
-- not in it.
-- order_open_key is order_key on rows that are not DONE, else NULL:
-- the order index holds only those. Adding a STORED column rebuilds the table: on a
-- large table, run it when the outbox is quiet. The key table comes first, so that a
-- migration stopped between the two statements is completed by running it again.
ALTER TABLE `outbox_event` ADD COLUMN order_key VARCHAR(255) NULL,
    ADD COLUMN order_seq BIGINT NULL,
    ADD COLUMN order_open_key VARCHAR(255) AS (CASE WHEN status <> 1 THEN order_key END) STORED,
    ADD INDEX `outbox_event_order_idx` (order_open_key, order_seq);

-- +goose Down
-- Drops the order columns and index, and the key table.
ALTER TABLE `outbox_event` DROP INDEX `outbox_event_order_idx`, DROP COLUMN order_open_key, DROP COLUMN order_seq, DROP COLUMN order_key;

DROP TABLE IF EXISTS `outbox_event_key`;
