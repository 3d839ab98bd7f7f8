package sqlstore

import (
	"fmt"

	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// The purge of finished rows (DONE, DEAD, FALLBACK, DISCARDED), in batches along the
// finished index, and of undelivered rows (NEW, RETRY, WAITING) past
// PurgeParams.UndeliveredBefore, along the pending and state indexes. The key table's
// purge is in dialect_order.go.

// finishedAt is when a finished row (DONE, DEAD, FALLBACK) finished, as far as Purge is
// concerned. The migrations index this exact expression.
const finishedAt = "COALESCE(done_at, created_at)"

// purgeQuery builds one batch of [Store.Purge]. On PostgreSQL the batch's rows are
// locked with SKIP LOCKED, so that two purgers (MultiNode) never wait for each other:
// each deletes rows the other has not locked. MySQL's one DELETE … ORDER BY … LIMIT
// waits for rows another transaction holds; SQLite has one writer at a time.
//
// ids, when set (a partitioned table, PostgreSQL), keeps the batch to the IDs of the
// partitions the partition maintenance looks at and may have kept (idRange).
func (d *dialect) purgeQuery(t tableName, p storage.PurgeParams, ids idRange) (query, error) {
	before, dead, upTo, err := d.purgeCutoffs(p)
	if err != nil {
		return query{}, err
	}
	b := d.newBuilder()
	if d.orderedDML {
		b.w("DELETE FROM ", d.qualified(t))
		b.purgeWhere(before, dead, upTo, p.Limit, idRange{})
		return b.query(), nil
	}
	// The outer conditions repeat the subquery's: PostgreSQL does not re-run the
	// subquery on a row that a concurrent transaction changed (a replay) while the
	// DELETE waited for it, but it re-checks these on the row's new version. On
	// PostgreSQL the batch's IDs drive the DELETE by primary key (= ANY(ARRAY(…))): as
	// IN (…), the planner made it a hash semi-join with a bitmap scan of every finished
	// row before the cutoff, per batch (TestPurgeUndeliveredUsesIndexes).
	b.w("DELETE FROM ", d.qualified(t), " WHERE event_id ")
	if d.idsAsArray {
		b.w("= ANY(ARRAY(")
	} else {
		b.w("IN (")
	}
	b.w("SELECT event_id FROM ", d.qualified(t))
	b.purgeWhere(before, dead, upTo, p.Limit, ids)
	if d.skipLocked {
		b.w(" FOR UPDATE SKIP LOCKED")
	}
	if d.idsAsArray {
		b.w(")")
	}
	b.w(") AND (", d.finishedStatus(), ") AND ", finishedAt, " < ", b.arg(upTo))
	b.purgeByStatus(finishedAt, before, dead)
	return b.query(), nil
}

// purgeCutoffs validates p and returns the purge's cutoffs as arguments: DONE rows',
// the other finished rows' (the same unless p.DeadBefore is set) and the later of the
// two, which bounds the index range.
func (d *dialect) purgeCutoffs(p storage.PurgeParams) (before, dead, upTo any, err error) {
	if err := p.Validate(); err != nil {
		return nil, nil, nil, err
	}
	deadBefore := p.DeadBefore
	if deadBefore.IsZero() {
		deadBefore = p.Before
	}
	if before, err = d.time(p.Before); err != nil {
		return nil, nil, nil, fmt.Errorf("the Before time: %w", err)
	}
	if dead, err = d.time(deadBefore); err != nil {
		return nil, nil, nil, fmt.Errorf("DeadBefore: %w", err)
	}
	upTo = before
	if deadBefore.After(p.Before) {
		upTo = dead
	}
	if deadBefore.Equal(p.Before) {
		dead = nil // one cutoff: no condition per status
	}
	return before, dead, upTo, nil
}

// purgeWhere writes the purge's WHERE, ORDER BY and LIMIT: the finished rows up to upTo
// in the finished index's order and, with two cutoffs (dead not nil), each row against
// its status's, within ids.
func (b *builder) purgeWhere(before, dead, upTo any, limit int, ids idRange) {
	d := b.d
	if col := d.finishedColumn; col != "" {
		// NULL unless the row is finished, so no status test is needed.
		b.w(" WHERE ", col, " < ", b.arg(upTo))
		b.purgeByStatus(col, before, dead)
		b.w(" ORDER BY ", col, ", event_id ").limit(int64(limit))
		return
	}
	b.w(" WHERE (", d.finishedStatus(), ") AND ", finishedAt, " < ", b.arg(upTo))
	b.purgeByStatus(finishedAt, before, dead)
	b.idRange(ids)
	b.w(" ORDER BY ", finishedAt, ", event_id ").limit(int64(limit))
}

// idRange is the part of a partitioned table's IDs that the purge deletes from
// (Store.purgeRange): IDs below below, or at or above from when it is set. The zero
// value is every ID.
type idRange struct {
	below, from string
}

// idRange writes the condition of ids, if any. PostgreSQL prunes the partitions out of
// it, at planning or, in a generic plan, when the statement starts.
func (b *builder) idRange(ids idRange) {
	switch {
	case ids.below == "":
	case ids.from == "":
		b.w(" AND event_id < ", b.arg(ids.below))
	default:
		b.w(" AND (event_id < ", b.arg(ids.below), " OR event_id >= ", b.arg(ids.from), ")")
	}
}

// purgeByStatus writes, when dead is set, the condition that holds DONE rows to before
// and the others to dead; at is the finish time's expression.
func (b *builder) purgeByStatus(at string, before, dead any) {
	if dead == nil {
		return
	}
	st := b.d.hintedStatus()
	done := sqlStatus(outboxtype.StatusDone)
	b.w(" AND (", st, " = ", done, " AND ", at, " < ", b.arg(before), " OR ", st, " <> ", done, " AND ", at, " < ", b.arg(dead), ")")
}

// purgeUndeliveredQuery builds one batch of the undelivered rows created before before
// (an argument): NEW and RETRY rows along the undelivered index (SQLite: the pending
// index), or with waiting WAITING rows along the state index, oldest first
// (created_at, event_id), at most limit rows; on MySQL both along the status index
// (dead_idx), NEW rows before RETRY rows. Its locking is the finished purge's
// (purgeQuery).
func (d *dialect) purgeUndeliveredQuery(t tableName, before any, waiting bool, limit int, ids idRange) query {
	b := d.newBuilder()
	b.w("DELETE FROM ", d.qualified(t))
	if d.orderedDML {
		if waiting {
			b.w(" WHERE status = ", sqlStatus(outboxtype.StatusWaiting), " AND created_at < ", b.arg(before))
			b.w(" ORDER BY created_at, event_id ").limit(int64(limit))
			return b.query()
		}
		// The status index in its order: a range per status.
		b.w(" WHERE status IN (", pendingStatuses(), ") AND created_at < ", b.arg(before), " ORDER BY status, created_at, event_id ").limit(int64(limit))
		return b.query()
	}
	// The subquery writes the partial index's condition (the state index's on
	// PostgreSQL with its created_at IS NOT NULL, see stateIndexCondition); the outer
	// conditions repeat the statuses and the cutoff, as purgeQuery's do, with SQLite's
	// +status, which no index matches. On PostgreSQL the batch's IDs drive the DELETE by
	// primary key (= ANY(ARRAY(…))): as IN (…), the planner made it a hash semi-join
	// with a scan of the whole table, whose rows the outer conditions match by the
	// thousand (TestPurgeUndeliveredUsesIndexes).
	b.w(" WHERE event_id ")
	if d.idsAsArray {
		b.w("= ANY(ARRAY(")
	} else {
		b.w("IN (")
	}
	b.w("SELECT event_id FROM ", d.qualified(t), " WHERE ")
	status := d.undeliveredCondition()
	outer := d.hintedStatus() + " IN (" + pendingStatuses() + ")"
	if waiting {
		st := sqlStatus(outboxtype.StatusWaiting)
		status = "status = " + st + " AND created_at IS NOT NULL"
		if d.name == "sqlite" {
			status = d.stateIndexCondition() + " AND status = " + st
		}
		outer = d.hintedStatus() + " = " + st
	}
	b.w(status, " AND created_at < ", b.arg(before))
	b.idRange(ids)
	b.w(" ORDER BY created_at, event_id ").limit(int64(limit))
	if d.skipLocked {
		b.w(" FOR UPDATE SKIP LOCKED")
	}
	if d.idsAsArray {
		b.w(")")
	}
	b.w(") AND ", outer, " AND created_at < ", b.arg(before))
	return b.query()
}
