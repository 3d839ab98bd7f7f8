package sqlstore

import (
	"fmt"
	"time"

	"github.com/outboxkit/outbox/core/storage"
)

// The lease migration (version 7 on PostgreSQL, 8 on MySQL and SQLite) and the
// statements of [LeaseStore]. Every time they compare or write comes from the database
// clock (dialect.dbNow); the only inputs are the holder, its mode and durations.

const (
	// leaseTableSuffix names the lease table beside the outbox table: <table>_lease.
	leaseTableSuffix = "_lease"
	// leaseRowName is the name of the lease table's one row: the table's dispatch lease.
	leaseRowName = "dispatch"
)

// leaseTable is the lease table beside t.
func leaseTable(t tableName) tableName {
	return tableName{schema: t.schema, name: t.indexName(leaseTableSuffix)}
}

// leaseTableComment explains the lease table.
const leaseTableComment = "The dispatch lease (docs/modes.md): one row, name 'dispatch', held by the processes\n" +
	"that deliver events from the table and renewed by the database clock. A SingleNode\n" +
	"process holds it alone (holder: an ID drawn at each start), MultiNode processes hold it\n" +
	"together (holder: the last one to renew it). A process that cannot take it writes events\n" +
	"but delivers none until it can, so that two SingleNode processes, or SingleNode and\n" +
	"MultiNode ones, never deliver from the table at the same time. Outbox.Start runs without\n" +
	"the lease on a table that lacks this version, with a warning."

// leaseMigration creates the lease table. It is detected by the table's holder column,
// and it is optional: [Outbox.Start] runs on a table without it (see [LeaseStore]).
func leaseMigration(d *dialect, t tableName) laterMigration {
	lt := d.qualified(leaseTable(t))
	timeType, suffix := d.sideTableTypes()
	col := func(name, typ string) string { return fmt.Sprintf("    %-12s%-13sNOT NULL", name, typ) }
	return laterMigration{
		name:     "lease",
		column:   "holder",
		tableOf:  leaseTableSuffix,
		optional: true,
		up: []ddlStatement{{leaseTableComment, "CREATE TABLE IF NOT EXISTS " + lt + " (\n" +
			col("name", "VARCHAR(32)") + " PRIMARY KEY,\n" +
			col("holder", "VARCHAR(128)") + ",\n" +
			col("holder_mode", "VARCHAR(16)") + ",\n" +
			col("acquired_at", timeType) + ",\n" +
			col("expires_at", timeType) + "\n" +
			")" + suffix}},
		down: []ddlStatement{{"Drops the lease table.", "DROP TABLE IF EXISTS " + lt}},
	}
}

// sideTableTypes returns, for a table the migrations create beside the outbox table
// (the lease's, the pause's), the column type of a time and what follows the column
// list: MySQL's engine and binary collation.
func (d *dialect) sideTableTypes() (timeType, suffix string) {
	switch d.name {
	case "sqlite":
		return "TEXT", ""
	case "mysql":
		return "DATETIME(6)", " ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin"
	}
	return "TIMESTAMPTZ", ""
}

// The values of the lease table's holder_mode: the names of the modes that hold an
// exclusive lease (SingleNode) and a shared one (MultiNode).
const (
	leaseModeSingle = "SingleNode"
	leaseModeShared = "MultiNode"
)

// leaseMode is p's holder_mode.
func leaseMode(p storage.LeaseParams) string {
	if p.Shared {
		return leaseModeShared
	}
	return leaseModeSingle
}

// leaseHeldBy is the condition under which p may take or renew the lease besides its
// expiry: a SingleNode holder renews its own lease, MultiNode holders share theirs.
func (b *builder) leaseHeldBy(p storage.LeaseParams) *builder {
	if p.Shared {
		return b.w("holder_mode = ", b.arg(leaseModeShared))
	}
	return b.w("holder = ", b.arg(p.Holder), " AND holder_mode = ", b.arg(leaseModeSingle))
}

// leaseAcquireQuery takes the lease for p when it expired, or renews it when p holds it
// (SingleNode) or MultiNode processes do (MultiNode: the expiry only moves forward, so
// a node with a shorter TTL never shortens another's). acquired_at changes only when
// the lease changes hands. MySQL assigns the columns left to right, each seeing the
// ones before it: acquired_at, which reads expires_at, comes first and expires_at last.
func (d *dialect) leaseAcquireQuery(t tableName, p storage.LeaseParams) query {
	b := d.newBuilder()
	expired := "expires_at < " + d.dbNow
	b.w("UPDATE ", d.qualified(leaseTable(t)), " SET acquired_at = CASE WHEN ", expired, " THEN ", d.dbNow, " ELSE acquired_at END",
		", holder = ", b.arg(p.Holder), ", holder_mode = ", b.arg(leaseMode(p)), ", expires_at = ")
	if p.Shared {
		b.w("CASE WHEN expires_at > ", d.dbTimeOffset(b, p.TTL), " THEN expires_at ELSE ", d.dbTimeOffset(b, p.TTL), " END")
	} else {
		b.w(d.dbTimeOffset(b, p.TTL))
	}
	b.w(" WHERE name = '", leaseRowName, "' AND (", expired, " OR ")
	return b.leaseHeldBy(p).w(")").query()
}

// leaseInsertQuery creates the lease row held by p, unless the row exists.
func (d *dialect) leaseInsertQuery(t tableName, p storage.LeaseParams) query {
	b := d.newBuilder()
	b.w("INSERT INTO ", d.qualified(leaseTable(t)), " (name, holder, holder_mode, acquired_at, expires_at) VALUES ('", leaseRowName, "', ",
		b.arg(p.Holder), ", ", b.arg(leaseMode(p)), ", ", d.dbNow, ", ", d.dbTimeOffset(b, p.TTL), ")")
	if d.name == "mysql" {
		b.w(" ON DUPLICATE KEY UPDATE name = name")
	} else {
		b.w(" ON CONFLICT (name) DO NOTHING")
	}
	return b.query()
}

// leaseReadQuery reads the lease row and the database's current time.
func (d *dialect) leaseReadQuery(t tableName) query {
	return query{SQL: "SELECT holder, holder_mode, expires_at, " + d.dbNow + " FROM " + d.qualified(leaseTable(t)) +
		" WHERE name = '" + leaseRowName + "'"}
}

// leaseReleaseQuery ends holder's SingleNode lease: it expires a second ago by the
// database clock (SQLite's has millisecond precision), so that any process takes it at
// its next attempt.
func (d *dialect) leaseReleaseQuery(t tableName, holder string) query {
	b := d.newBuilder()
	b.w("UPDATE ", d.qualified(leaseTable(t)), " SET expires_at = ", d.dbTimeOffset(b, -time.Second),
		" WHERE name = '", leaseRowName, "' AND ")
	return b.leaseHeldBy(storage.LeaseParams{Holder: holder}).query()
}
