-- Aggregate: the admin's lists of one aggregate's events (aggregate_id, then
-- creation order) read this index, whatever their status.
ALTER TABLE `outbox_event` ADD INDEX `outbox_event_aggregate_idx` (aggregate_id, created_at, event_id);
