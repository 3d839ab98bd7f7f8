-- Drops the aggregate index and the audit table.
ALTER TABLE `outbox_event` DROP INDEX `outbox_event_aggregate_idx`;

DROP TABLE IF EXISTS `outbox_event_audit`;
