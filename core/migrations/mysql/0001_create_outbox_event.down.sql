-- Drops the table and its indexes.
DROP TABLE IF EXISTS `outbox_event`;
