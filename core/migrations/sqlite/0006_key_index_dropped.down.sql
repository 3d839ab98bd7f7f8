-- Purge finds the key rows not written for the retention by updated_at.
CREATE INDEX IF NOT EXISTS "outbox_event_key_updated_idx" ON "outbox_event_key" (updated_at);
