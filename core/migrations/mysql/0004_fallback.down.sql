-- Drops first_attempt_at and restores the generated columns of version 3.
ALTER TABLE `outbox_event` DROP COLUMN first_attempt_at,
    MODIFY COLUMN finished_at DATETIME(6) AS (CASE WHEN status IN (1, 3) THEN COALESCE(done_at, created_at) END) STORED,
    MODIFY COLUMN order_open_key VARCHAR(255) AS (CASE WHEN status <> 1 THEN order_key END) STORED;
