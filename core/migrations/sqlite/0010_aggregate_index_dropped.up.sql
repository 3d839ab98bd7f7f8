-- Drops the aggregate index. Every event with an aggregate ID wrote an entry in it, and
-- its DONE update another (an update that changes the status is never HOT): the lists
-- of one aggregate's events cost every write. outbox.MigrateAggregateIndex creates it
-- again, under another name, for those who list by aggregate.
DROP INDEX IF EXISTS "outbox_event_aggregate_idx";
