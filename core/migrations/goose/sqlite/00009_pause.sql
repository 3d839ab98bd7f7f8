-- +goose Up
-- The paused subscriptions (docs/listeners.md, pause): one row per paused subscription,
-- by name. Every process that delivers from the table reads them at each poll cycle and
-- leaves their events pending (NEW, RETRY) until the row is deleted (Events.Resume).
-- Outbox.Start runs on a table that lacks this version, with nothing paused.
CREATE TABLE IF NOT EXISTS "outbox_event_pause" (
    listener  VARCHAR(255)  NOT NULL PRIMARY KEY,
    paused_at TEXT          NOT NULL,
    paused_by VARCHAR(255)  NOT NULL,
    reason    TEXT          NOT NULL
);

-- +goose Down
-- Drops the pause table.
DROP TABLE IF EXISTS "outbox_event_pause";
