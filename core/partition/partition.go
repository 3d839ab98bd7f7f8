// Package outboxpartition is a prototype of a time-partitioned outbox table on
// PostgreSQL 14 or later: the table is partitioned by event ID (ULIDs, whose first
// characters are their time), one partition per period, and old partitions are dropped
// once the purge would delete each of their rows. It is not a supported API: it exists
// so that the tests of the prototype can reach it (see the partition-spike branch).
//
// Import path: github.com/outboxkit/outbox/core/partition (package outboxpartition).
package outboxpartition

import (
	"context"
	"database/sql"
	"time"

	"github.com/outboxkit/outbox/core/internal/sqlstore"
)

// Config is the layout of a partitioned outbox table: one partition per Period, Ahead
// periods created in advance.
type Config = sqlstore.PartitionConfig

// Maintenance configures [Maintain].
type Maintenance = sqlstore.PartitionMaintenance

// Report is what [Maintain] did.
type Report = sqlstore.PartitionReport

// Step is one timed step of [Maintain].
type Step = sqlstore.PartitionStep

// Migrate is outbox.MigrateTable for a table partitioned by event ID: it creates the
// table partitioned when it does not exist, applies the later versions, and creates the
// partitions of cfg from the period of now on. It converts no existing table.
func Migrate(ctx context.Context, db *sql.DB, table string, cfg Config, now time.Time) error {
	return sqlstore.MigratePartitionedTable(ctx, db, sqlstore.Postgres, table, cfg, now)
}

// Maintain creates the partitions ahead on the partitioned outbox table named table and
// drops the old ones whose rows the purge of m.Purge would all delete, fenced so that a
// replay racing the drop fails instead of losing its row.
func Maintain(ctx context.Context, db *sql.DB, table string, m Maintenance) (Report, error) {
	return sqlstore.MaintainPartitions(ctx, db, sqlstore.Postgres, table, m)
}
