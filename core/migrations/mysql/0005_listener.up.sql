-- Fan-out (docs/listeners.md): an event with several listeners is split into one row
-- per listener, whose listener column names it; a row whose listener failed for good
-- (DEAD, FALLBACK) names that listener, so that dead events are listed and replayed
-- per listener.
ALTER TABLE `outbox_event` ADD COLUMN listener VARCHAR(255) NULL;
