-- Drops the order columns and index, and the key table.
ALTER TABLE `outbox_event` DROP INDEX `outbox_event_order_idx`, DROP COLUMN order_open_key, DROP COLUMN order_seq, DROP COLUMN order_key;

DROP TABLE IF EXISTS `outbox_event_key`;
