package outbox

import (
	"context"
	"database/sql"
	"time"

	"github.com/outboxkit/outbox/core/internal/sqlstore"
)

// A time-partitioned outbox table on PostgreSQL: a prototype, not a supported API. The
// names below exist so that the tests of the prototype can reach it; a shipped feature
// would choose its API anew (see the partition-spike branch's report).

// PartitionConfig is the layout of a partitioned outbox table: one partition per
// Period of event IDs (ULIDs, whose first characters are their time), Ahead periods
// created in advance. Experimental.
type PartitionConfig = sqlstore.PartitionConfig

// PartitionMaintenance configures [MaintainPartitions]. Experimental.
type PartitionMaintenance = sqlstore.PartitionMaintenance

// PartitionReport is what [MaintainPartitions] did. Experimental.
type PartitionReport = sqlstore.PartitionReport

// MigratePartitionedTable is [MigrateTable] for a table partitioned by event ID
// (PostgreSQL 14 or later): it creates the table partitioned when it does not exist,
// applies the later versions, and creates the partitions of cfg from the period of now
// on. It converts no existing table. Experimental.
func MigratePartitionedTable(ctx context.Context, db *sql.DB, d Dialect, table string, cfg PartitionConfig, now time.Time) error {
	if db == nil {
		return &ConfigError{Field: "DB", Reason: "nil *sql.DB"}
	}
	if d == nil {
		return &ConfigError{Field: "Dialect", Reason: "nil"}
	}
	return sqlstore.MigratePartitionedTable(ctx, db, d.sql(), table, cfg, now)
}

// MaintainPartitions creates the partitions ahead on the partitioned outbox table
// named table and drops the old ones whose rows the purge of m.Purge would all delete,
// fenced so that a replay racing the drop fails instead of losing its row.
// Experimental.
func MaintainPartitions(ctx context.Context, db *sql.DB, d Dialect, table string, m PartitionMaintenance) (PartitionReport, error) {
	if db == nil {
		return PartitionReport{}, &ConfigError{Field: "DB", Reason: "nil *sql.DB"}
	}
	if d == nil {
		return PartitionReport{}, &ConfigError{Field: "Dialect", Reason: "nil"}
	}
	return sqlstore.MaintainPartitions(ctx, db, d.sql(), table, m)
}
