// Package outboxpartition makes the outbox table a partitioned table on PostgreSQL (14
// or later), for rates at which deleting rows one by one is the purge's cost: old
// partitions are dropped whole instead (docs/partitioning.md).
//
// The table is partitioned by event ID, not by a time column: the library's IDs are
// ULIDs, whose first 10 characters are the millisecond they were made at, so their
// order is time order, and one partition holds the events of one period (a day by
// default). The primary key stays event_id, so that idempotent writes (ON CONFLICT),
// fan-out and every statement by ID work unchanged, and a read by ID reads one
// partition. A fan-out delivery's ID, "<event ID>.<hash>", sorts right after its
// event's, in the same partition.
//
// Once the table is partitioned, the outbox's purger maintains it at each run (every
// PurgeInterval): it creates the partitions ahead, drops each old partition whose rows
// its purge would all delete, and deletes row by row only in the old partitions it
// keeps (one that holds a pending or replayable row). Nothing else changes: the
// writer, the dispatcher, the admin and the CLI read and write the table as before.
//
// What a user gives up:
//   - IDs must be ULIDs of a period that has a partition: the library's own IDs, or a
//     caller's ULIDs of the last days. Another ID (a UUID, a custom string) is refused
//     with an error matching outbox.ErrInvalidArgument before the INSERT, so the
//     caller's transaction stays usable.
//   - Writes stop with that error if no partition exists for the current period: the
//     purger creates them ahead (at least 3 periods, and enough to cover two
//     PurgeIntervals), so that takes a purger that has not run for that long.
//   - The drop of a partition freezes it first, under a lock of at most
//     Maintenance.LockTimeout (1 s by default) that statements on the table which read
//     every partition (the poll, the claim, the admin's lists) wait behind; the freeze
//     itself holds it for milliseconds. A replay of a row of a partition being dropped
//     fails with SQLSTATE 23514 (the row is purgeable, and goes with the partition).
//
// Migrate creates a new partitioned table, Convert converts an existing one (rows and
// all, under a lock for the time it takes), and Maintain runs the maintenance on its own,
// for a user who does not run the purger.
package outboxpartition

import (
	"context"
	"database/sql"
	"time"

	"github.com/outboxkit/outbox/core/internal/sqlstore"
	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// errNilDB is the *outbox.ConfigError of a nil db, as outbox.MigrateTable's.
var errNilDB = &outboxtype.ConfigError{Field: "DB", Reason: "nil *sql.DB"}

// Config is the layout of a partitioned outbox table.
type Config struct {
	// Period is the time one partition covers: a whole number of minutes that divides
	// an hour, of hours that divides a day, or of days. Periods start at the Unix epoch
	// (UTC). Defaults to a day.
	Period time.Duration
	// Ahead is the number of periods after the current one that Migrate, Convert and
	// Maintain create in advance. Defaults to 3.
	Ahead int
	// From is a time in the first period Migrate creates a partition for (Convert: the
	// period whose end bounds the converted rows). Defaults to now. Maintain does not
	// read it.
	From time.Time
}

func (c Config) internal() sqlstore.PartitionConfig {
	return sqlstore.PartitionConfig{Period: c.Period, Ahead: c.Ahead, From: c.From}
}

// Maintenance configures [Maintain].
type Maintenance struct {
	// Config is the table's layout: the periods ahead to create.
	Config Config
	// Now is the current time, whose period and the Config.Ahead after it must have
	// partitions. Defaults to time.Now().
	Now time.Time
	// Purge holds the purge's cutoffs (Before, DeadBefore, UndeliveredBefore; Limit is
	// not used): a partition is dropped when that purge would delete each of its rows.
	// Only partitions whose period ended by Purge.Before and before the current period
	// are looked at. Before is required.
	Purge storage.PurgeParams
	// LockTimeout bounds the wait for each ALTER's lock; a partition whose freeze times
	// out is reported Busy and tried again at the next run. Defaults to 1 s.
	LockTimeout time.Duration
	// StepTimeout bounds each step on one partition (its create, freeze, detach or
	// drop). A detach it cancels is left pending, and the next run finishes it. Zero: no
	// bound.
	StepTimeout time.Duration
}

// Report says what one [Maintain] did, by partition name.
type Report struct {
	Created []string // new partitions, attached
	Dropped []string // old partitions, detached and dropped
	Kept    []string // old partitions that hold a row the purge would keep
	Busy    []string // old partitions whose freeze did not get its lock in time
	// Skipped is set when another process maintained the table at the time (its
	// session-level advisory lock was taken): the run did nothing.
	Skipped bool
	// Steps are the steps' times, in order.
	Steps []Step
}

// Step is how long one step of [Maintain] took on one partition: "create" (the table,
// its indexes and the ATTACH, one transaction), "freeze" (the constraint and the
// probes, one transaction), "detach" (DETACH … CONCURRENTLY or FINALIZE) or "drop".
type Step struct {
	Partition, Step string
	Took            time.Duration
}

// Migrate is outbox.MigrateTable for a table partitioned by event ID: it creates the
// table partitioned when it does not exist, applies the later versions, and creates the
// partitions of cfg from the period of cfg.From on. Run it instead of MigrateTable, and
// again after an upgrade of the library, as MigrateTable. On a table that exists and is
// not partitioned it returns an *outbox.ConfigError: [Convert] converts one.
func Migrate(ctx context.Context, db *sql.DB, table string, cfg Config) error {
	if db == nil {
		return errNilDB
	}
	return sqlstore.MigratePartitionedTable(ctx, db, sqlstore.Postgres, table, cfg.internal())
}

// Convert makes the existing outbox table named table partitioned, rows and all: the
// table becomes the partition of every ID before the end of cfg.From's period, and new
// partitions follow it. It holds the table under an ACCESS EXCLUSIVE lock while it
// rebuilds the indexes that hold event_id (to COLLATE "C") and reads the table once, so
// every write and delivery waits for it: run it when the table is small or the
// application stopped, and restart the processes afterwards (a statement a connection
// prepared before fails once). An ID that sorts after that bound (an ID that is not a
// ULID, or one of a later period) returns an *outbox.ConfigError naming it, and the
// table is left as it was.
func Convert(ctx context.Context, db *sql.DB, table string, cfg Config) error {
	if db == nil {
		return errNilDB
	}
	return sqlstore.ConvertToPartitioned(ctx, db, sqlstore.Postgres, table, cfg.internal())
}

// Maintain creates the partitions ahead on the partitioned outbox table named table
// and drops the old ones whose rows the purge of m.Purge would all delete, fenced so
// that a replay racing the drop fails instead of losing its row. The outbox's purger
// runs it on its own; Maintain is for a process that maintains the table without one.
// One maintainer runs at a time (a session advisory lock); a second returns a Report
// with Skipped set. It returns what it did so far and an error on the first failure
// other than a lock timeout.
func Maintain(ctx context.Context, db *sql.DB, table string, m Maintenance) (Report, error) {
	if db == nil {
		return Report{}, errNilDB
	}
	r, err := sqlstore.MaintainPartitions(ctx, db, sqlstore.Postgres, table, sqlstore.PartitionMaintenance{
		Config: m.Config.internal(), Now: m.Now, Purge: m.Purge, LockTimeout: m.LockTimeout, StepTimeout: m.StepTimeout,
	})
	rep := Report{Created: r.Created, Dropped: r.Dropped, Kept: r.Kept, Busy: r.Busy, Skipped: r.Skipped}
	for _, st := range r.Steps {
		rep.Steps = append(rep.Steps, Step{Partition: st.Partition, Step: st.Step, Took: st.Took})
	}
	return rep, err
}
