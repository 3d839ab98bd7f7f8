-- Fallback (docs/listeners.md): status 5 FALLBACK is an event whose listener failed for
-- good and whose fallback handled it. Statuses 5 and above are handled outcomes besides
-- DONE and DEAD: purged like them, and releasing their order key like DONE.
-- first_attempt_at is when the first failed attempt was recorded, for the fallback's
-- failure context; a replay clears it.
-- Changing STORED columns rebuilds the table: on a large table, run it when the
-- outbox is quiet.
ALTER TABLE `outbox_event` ADD COLUMN first_attempt_at DATETIME(6) NULL,
    MODIFY COLUMN finished_at DATETIME(6) AS (CASE WHEN status IN (1, 3) OR status >= 5 THEN COALESCE(done_at, created_at) END) STORED,
    MODIFY COLUMN order_open_key VARCHAR(255) AS (CASE WHEN status <> 1 AND status < 5 THEN order_key END) STORED;
