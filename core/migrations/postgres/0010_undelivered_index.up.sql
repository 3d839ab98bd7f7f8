-- Undelivered: the admin's list and count of NEW events and the purge of undelivered
-- rows walk NEW and RETRY rows in (created_at, event_id) order. It replaces the pending
-- index, which held the same rows under the condition of the claim index: now and then,
-- right after an autoanalyze, the planner read the poller's rows along it, whose
-- entries of delivered events no other read had marked dead, tens of thousands of
-- buffers for a read of a few rows. attempts >= 0 is always true: it keeps the planner
-- from using this index for the queries that do not write it, the poller's reads and
-- the claims, which walk the claim index.
CREATE INDEX IF NOT EXISTS "outbox_event_undelivered_idx" ON "outbox_event" (created_at, event_id) WHERE status IN (0, 2) AND attempts >= 0;

-- Drops the pending index, which undelivered_idx replaces. It comes after the build
-- so that the DROP's exclusive lock, which the transaction holds to its end, holds
-- off the table's reads for a moment only: the build holds off its writes alone.
DROP INDEX IF EXISTS "outbox_event_pending_idx";
