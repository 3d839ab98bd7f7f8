-- Purge finds the key rows not written for the retention by updated_at.
ALTER TABLE `outbox_event_key` ADD INDEX `outbox_event_key_updated_idx` (updated_at);
