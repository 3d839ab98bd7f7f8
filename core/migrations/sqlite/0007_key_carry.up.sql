-- The key row carries a key's counter from when its events leave the order index, not
-- from when they are written (docs/ordering.md). An ordered write numbers its events from
-- the highest order_seq of the key's open rows, or when it has none from the key row's
-- last_seq, and writes nothing to the key row. SQLite runs one writer at a time, so the
-- numbers follow commit order without a lock on the key row. These triggers raise the
-- key row's last_seq to the order_seq of a row that leaves the order index: finished
-- (DONE, FALLBACK, DISCARDED) or deleted while open. After this version no process of
-- an earlier release may write ordered events to the table: it would number them from
-- the key row alone.
-- The first trigger: a row finished.
-- +goose StatementBegin
CREATE TRIGGER IF NOT EXISTS "outbox_event_key_carry_done" AFTER UPDATE OF status ON "outbox_event"
    WHEN old.order_key IS NOT NULL AND old.status <> 1 AND old.status < 5 AND NOT (new.status <> 1 AND new.status < 5)
    BEGIN
        INSERT INTO "outbox_event_key" (order_key, last_seq, updated_at) VALUES (old.order_key, old.order_seq, strftime('%Y-%m-%dT%H:%M:%f000Z', 'now'))
            ON CONFLICT (order_key) DO UPDATE SET last_seq = max(last_seq, excluded.last_seq), updated_at = excluded.updated_at;
    END;
-- +goose StatementEnd

-- The second: an open row deleted (a DEAD row, by DeadEvents.Delete or a purge).
-- +goose StatementBegin
CREATE TRIGGER IF NOT EXISTS "outbox_event_key_carry_delete" AFTER DELETE ON "outbox_event"
    WHEN old.order_key IS NOT NULL AND old.status <> 1 AND old.status < 5
    BEGIN
        INSERT INTO "outbox_event_key" (order_key, last_seq, updated_at) VALUES (old.order_key, old.order_seq, strftime('%Y-%m-%dT%H:%M:%f000Z', 'now'))
            ON CONFLICT (order_key) DO UPDATE SET last_seq = max(last_seq, excluded.last_seq), updated_at = excluded.updated_at;
    END;
-- +goose StatementEnd
