package sqlstore

import (
	"fmt"
	"time"

	"github.com/outboxkit/outbox/core/internal/check"
	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// The statements of DEAD rows: ListDead, CountDead, Replay, DeleteDead, and Discard of
// rows not finished yet.

// deadWhere writes the WHERE clause selecting DEAD rows that match f. hinted is set
// for the queries that walk DEAD rows in created_at order, which the dead index serves.
func (b *builder) deadWhere(f outboxtype.DeadFilter, hinted bool) *builder {
	status := "status"
	if hinted {
		status = b.d.hintedStatus()
	}
	b.w(" WHERE ", status, " = ", sqlStatus(outboxtype.StatusDead))
	if f.EventType != "" {
		b.w(" AND event_type = ", b.arg(f.EventType))
	}
	if f.AggregateType != "" {
		b.w(" AND aggregate_type = ", b.arg(f.AggregateType))
	}
	if f.Listener != "" {
		b.w(" AND listener = ", b.arg(f.Listener))
	}
	return b
}

// listDeadQuery builds one keyset page of [DeadStore.ListDead].
func (d *dialect) listDeadQuery(t tableName, p storage.ListDeadParams) (query, error) {
	if err := p.Validate(); err != nil {
		return query{}, err
	}
	b := d.newBuilder()
	b.w("SELECT ", selectColumns, " FROM ", d.qualified(t))
	b.deadWhere(p.DeadFilter, true)
	if !p.After.IsZero() {
		after, err := d.time(p.After.CreatedAt)
		if err != nil {
			return query{}, fmt.Errorf("the After cursor: %w", err)
		}
		b.keysetAfter("created_at", after, p.After.ID)
	}
	b.w(" ORDER BY created_at, event_id ").limit(int64(p.Limit))
	return b.query(), nil
}

// countDeadQuery builds [DeadStore.CountDead].
func (d *dialect) countDeadQuery(t tableName, f outboxtype.DeadFilter) query {
	b := d.newBuilder()
	b.w("SELECT COUNT(*) FROM ", d.qualified(t))
	return b.deadWhere(f, false).query()
}

// replaySet is the assignment list of a replay; its one argument is available_at. An
// ordered event goes back to WAITING: Promote makes it NEW when its key lets it.
func (b *builder) replaySet(table string, now any) *builder {
	return b.w("UPDATE ", table, " SET status = CASE WHEN order_key IS NULL THEN ", sqlStatus(outboxtype.StatusNew),
		" ELSE ", sqlStatus(outboxtype.StatusWaiting), " END, attempts = 0, last_error = NULL, done_at = NULL, "+
			"first_attempt_at = NULL, available_at = ", b.arg(now), clearClaim)
}

// deleteDeadQueries builds [DeadStore.DeleteDead]: one delete per chunk of ids, of the
// rows that are DEAD (hinted on SQLite so that they are found by primary key).
func (d *dialect) deleteDeadQueries(t tableName, ids []string) []query {
	var qs []query
	for _, chunk := range d.chunkIDs(ids) {
		b := d.newBuilder().w("DELETE FROM ", d.qualified(t), " WHERE ")
		if d.byIDHint != "" {
			// A single-table DELETE takes no index hint; the multi-table form does.
			b = d.newBuilder().w("DELETE ", d.qualified(t), " FROM ", d.byID(t), " WHERE ")
		}
		qs = append(qs, b.matchIDs(chunk).w(" AND ", d.hintedStatus(), " = ", sqlStatus(outboxtype.StatusDead)).query())
	}
	return qs
}

// discardQueries builds [DiscardStore.Discard]: one update per chunk of ids, of the
// rows not finished yet.
func (d *dialect) discardQueries(t tableName, ids []string, at time.Time) ([]query, error) {
	for _, id := range ids {
		if !check.PossibleID(id) {
			return nil, check.Invalid("discard", "ID %q is empty, longer than %d bytes, or not valid text", id, outboxtype.MaxIDLen)
		}
	}
	if at.IsZero() {
		return nil, check.Invalid("discard", "the time is zero")
	}
	atArg, err := d.time(at)
	if err != nil {
		return nil, err
	}
	var qs []query
	for _, chunk := range d.chunkIDs(ids) {
		b := d.newBuilder()
		b.w("UPDATE ", d.byID(t), " SET status = ", sqlStatus(outboxtype.StatusDiscarded), ", done_at = ", b.arg(atArg), clearClaim, " WHERE ")
		qs = append(qs, b.matchIDs(chunk).w(" AND status IN (", sqlStatuses(outboxtype.StatusNew, outboxtype.StatusRetry, outboxtype.StatusDead, outboxtype.StatusWaiting), ")").query())
	}
	return qs, nil
}

// replayQueries builds [DeadStore.Replay]: one update per chunk of p.IDs, or one bounded
// update of the oldest DEAD rows matching the filter.
func (d *dialect) replayQueries(t tableName, p storage.ReplayParams) ([]query, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	now, err := d.time(p.Now)
	if err != nil {
		return nil, fmt.Errorf("the Now time: %w", err)
	}
	if len(p.IDs) > 0 {
		var qs []query
		for _, ids := range d.chunkIDs(p.IDs) {
			b := d.newBuilder().replaySet(d.byID(t), now).w(" WHERE ")
			b.matchIDs(ids).w(" AND ", d.hintedStatus(), " = ", sqlStatus(outboxtype.StatusDead))
			qs = append(qs, b.query())
		}
		return qs, nil
	}
	b := d.newBuilder().replaySet(d.qualified(t), now)
	if d.orderedDML {
		b.deadWhere(p.DeadFilter, true).w(" ORDER BY created_at, event_id ").limit(int64(p.Limit))
		return []query{b.query()}, nil
	}
	// The outer status test guards against a concurrent change between the subquery
	// and the update (PostgreSQL re-checks it on the row it locks); hinted on SQLite so
	// that the rows are found by primary key, never by an index on status.
	b.w(" WHERE event_id IN (SELECT event_id FROM ", d.qualified(t))
	b.deadWhere(p.DeadFilter, true).w(" ORDER BY created_at, event_id ").limit(int64(p.Limit)).w(") AND ", d.hintedStatus(), " = ", sqlStatus(outboxtype.StatusDead))
	return []query{b.query()}, nil
}
