-- +goose Up
-- The dispatch lease (docs/modes.md): one row, name 'dispatch', held by the processes
-- that deliver events from the table and renewed by the database clock. A SingleNode
-- process holds it alone (holder: an ID drawn at each start), MultiNode processes hold it
-- together (holder: the last one to renew it). A process that cannot take it writes events
-- but delivers none until it can, so that two SingleNode processes, or SingleNode and
-- MultiNode ones, never deliver from the table at the same time. Outbox.Start runs without
-- the lease on a table that lacks this version, with a warning.
CREATE TABLE IF NOT EXISTS "outbox_event_lease" (
    name        VARCHAR(32)  NOT NULL PRIMARY KEY,
    holder      VARCHAR(128) NOT NULL,
    holder_mode VARCHAR(16)  NOT NULL,
    acquired_at TEXT         NOT NULL,
    expires_at  TEXT         NOT NULL
);

-- +goose Down
-- Drops the lease table.
DROP TABLE IF EXISTS "outbox_event_lease";
