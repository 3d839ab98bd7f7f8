-- Drops the triggers, and raises each key row to its key's highest open order_seq,
-- from which the earlier versions' writers number.
DROP TRIGGER IF EXISTS "outbox_event_key_carry_delete";

DROP TRIGGER IF EXISTS "outbox_event_key_carry_done";

UPDATE "outbox_event_key" SET last_seq = max(last_seq, COALESCE((SELECT max(e.order_seq) FROM "outbox_event" e WHERE e.order_key = "outbox_event_key".order_key AND e.order_key IS NOT NULL AND e.status <> 1 AND e.status < 5), 0));
