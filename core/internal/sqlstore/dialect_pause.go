package sqlstore

import (
	"fmt"

	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// The pause migration (version 8 on PostgreSQL, 9 on MySQL and SQLite) and the
// statements of [storage.PauseStore].

// pauseTableSuffix names the pause table beside the outbox table: <table>_pause.
const pauseTableSuffix = "_pause"

// pauseTable is the pause table beside t.
func pauseTable(t tableName) tableName {
	return tableName{schema: t.schema, name: t.indexName(pauseTableSuffix)}
}

// pauseTableComment explains the pause table.
const pauseTableComment = "The paused subscriptions (docs/listeners.md, pause): one row per paused subscription,\n" +
	"by name. Every process that delivers from the table reads them at each poll cycle and\n" +
	"leaves their events pending (NEW, RETRY) until the row is deleted (Events.Resume).\n" +
	"Outbox.Start runs on a table that lacks this version, with nothing paused."

// pauseMigration creates the pause table. It is detected by the table's paused_by
// column, and it is optional: [Outbox.Start] runs on a table without it (see
// [storage.PauseStore]).
func pauseMigration(d *dialect, t tableName) laterMigration {
	pt := d.qualified(pauseTable(t))
	timeType, suffix := d.sideTableTypes()
	col := func(name, typ string) string { return fmt.Sprintf("    %-10s%-14sNOT NULL", name, typ) }
	return laterMigration{
		name:     "pause",
		column:   "paused_by",
		tableOf:  pauseTableSuffix,
		optional: true,
		up: []ddlStatement{{pauseTableComment, "CREATE TABLE IF NOT EXISTS " + pt + " (\n" +
			col("listener", fmt.Sprintf("VARCHAR(%d)", outboxtype.MaxListenerLen)) + " PRIMARY KEY,\n" +
			col("paused_at", timeType) + ",\n" +
			col("paused_by", "VARCHAR(255)") + ",\n" +
			col("reason", "TEXT") + "\n" +
			")" + suffix}},
		down: []ddlStatement{{"Drops the pause table.", "DROP TABLE IF EXISTS " + pt}},
	}
}

// pausedQuery reads the paused subscriptions, by name.
func (d *dialect) pausedQuery(t tableName) query {
	return query{SQL: "SELECT listener, paused_at, paused_by, reason FROM " + d.qualified(pauseTable(t)) + " ORDER BY listener"}
}

// setPausedQuery pauses p.Listener (a row that exists is kept as it is) or resumes it
// (its row is deleted); either changes one row or none.
func (d *dialect) setPausedQuery(t tableName, p storage.SetPausedParams) query {
	b := d.newBuilder()
	pt := d.qualified(pauseTable(t))
	if !p.Pause {
		return b.w("DELETE FROM ", pt, " WHERE listener = ", b.arg(p.Listener)).query()
	}
	b.w("INSERT INTO ", pt, " (listener, paused_at, paused_by, reason) VALUES (", b.arg(p.Listener), ", ", d.dbNow, ", ",
		b.arg(p.Entry.Actor), ", ", b.arg(p.Reason), ")")
	if d.name == "mysql" {
		return b.w(" ON DUPLICATE KEY UPDATE listener = listener").query()
	}
	return b.w(" ON CONFLICT (listener) DO NOTHING").query()
}

// pinQueries write p.Listener into the listener column of the pending rows among p.IDs
// that have none and clear their claim (only of rows p.Token claims, when set), one
// statement per chunk of IDs.
func (d *dialect) pinQueries(t tableName, p storage.PinParams) []query {
	var qs []query
	for _, chunk := range d.chunkIDs(p.IDs) {
		b := d.newBuilder()
		b.w("UPDATE ", d.byID(t), " SET listener = ", b.arg(p.Listener), clearClaim, " WHERE ")
		b.matchIDs(chunk).w(" AND listener IS NULL AND status IN (", pendingStatuses(), ")")
		if p.Token != "" {
			b.w(" AND locked_by = ", b.arg(p.Token))
		}
		qs = append(qs, b.query())
	}
	return qs
}

// skip leaves out of a scan of pending rows those of s ([storage.Skip]): the rows whose
// listener is one of s.Listeners, and the rows without one whose aggregate and event
// types are one of s.Routes. It is a filter on the rows the scan's index walks.
func (b *builder) skip(s storage.Skip) *builder {
	if len(s.Listeners) > 0 {
		b.w(" AND (listener IS NULL OR listener NOT IN (")
		for i, n := range s.Listeners {
			if i > 0 {
				b.w(", ")
			}
			b.w(b.arg(n))
		}
		b.w("))")
	}
	if len(s.Routes) > 0 {
		b.w(" AND (listener IS NOT NULL OR NOT (")
		for i, r := range s.Routes {
			if i > 0 {
				b.w(" OR ")
			}
			b.w("aggregate_type = ", b.arg(r.AggregateType), " AND event_type = ", b.arg(r.EventType))
		}
		b.w("))")
	}
	return b
}
