package sqlstore

import (
	"fmt"
	"strings"

	"github.com/outboxkit/outbox/core/internal/check"
	"github.com/outboxkit/outbox/core/storage"
)

// Claim statements. Every time they compare or write comes from the database clock
// (dialect.dbNow); the only inputs are durations.

// claimWhere writes the claim predicate: NEW and RETRY rows that are due, and due at or
// after p.DueFrom when it is set, not younger than p.SkipRecent, unclaimed or whose
// claim expired, and of no paused subscription. DueFrom starts the walk of the pending
// index there instead of at its head (the poller's low-water mark).
func (b *builder) claimWhere(p storage.ClaimParams) error {
	d := b.d
	due := "available_at"
	if col := d.dueColumn; col != "" {
		// NULL unless the row is NEW or RETRY, so no status test is needed.
		due = col
		b.w(" WHERE ", col, " <= ", d.dbNow)
	} else {
		b.w(" WHERE status IN (", pendingStatuses(), ") AND available_at <= ", d.dbNow)
	}
	if !p.DueFrom.IsZero() {
		from, err := d.time(p.DueFrom)
		if err != nil { // outside what the database's times hold
			return check.Invalid("claim", "DueFrom: %v", err)
		}
		b.w(" AND ", due, " >= ", b.arg(from))
	}
	b.w(" AND created_at <= ", d.dbTimeOffset(b, -p.SkipRecent),
		" AND (locked_until IS NULL OR locked_until < ", d.dbNow, ")").skip(p.Skip)
	return nil
}

// claimOrder is the order in which rows are claimed: due longest first. On MySQL it is
// the order of the pending index (due_at, created_at, then the primary key), so the
// locking read walks the index and stops after Limit rows instead of locking every due
// row for a sort.
func (d *dialect) claimOrder() string {
	if col := d.dueColumn; col != "" {
		return " ORDER BY " + col + ", created_at, event_id"
	}
	return " ORDER BY available_at, created_at, event_id"
}

// claimQuery builds [ClaimStore.Claim] as one statement for the dialects that can
// (claimInTx unset). PostgreSQL locks the rows in a materialized CTE with FOR UPDATE
// SKIP LOCKED and updates exactly those (an "IN (SELECT … LIMIT n)" subquery may be
// evaluated again and claim more than n rows); SQLite, whose writers are serialised,
// updates the rows of an IN subquery. Both return the claimed rows, in no particular
// order; PostgreSQL returns each row's previous locked_by, SQLite the new one.
// PostgreSQL's UPDATE finds the rows by primary key from an array of the CTE's IDs
// (= ANY(ARRAY(…)), computed once) besides the join that gives back locked_by: with
// the join alone the planner may hash-join the batch to a sequential read of the table,
// which it did on partitions of 10,000 rows each (TestPartitionedOperationsUseIndexes).
func (d *dialect) claimQuery(t tableName, p storage.ClaimParams) (query, error) {
	if err := p.Validate(); err != nil {
		return query{}, err
	}
	if d.claimInTx {
		return query{}, fmt.Errorf("dialect %s claims in a transaction", d.name)
	}
	table := d.qualified(t)
	b := d.newBuilder()
	if d.idsAsArray { // PostgreSQL
		// The CTE keeps each row's previous claim, which RETURNING gives back in the
		// place of locked_by (the caller knows the new one): a take-over shows.
		b.w("WITH claimed AS MATERIALIZED (SELECT event_id, locked_by FROM ", table)
		if err := b.claimWhere(p); err != nil {
			return query{}, err
		}
		b.w(d.claimOrder(), " ").limit(int64(p.Limit)).w(" FOR UPDATE SKIP LOCKED) UPDATE ", table,
			" AS t SET locked_by = ", b.arg(p.Token), ", locked_until = ", d.dbTimeOffset(b, p.TTL),
			" FROM claimed WHERE t.event_id = ANY(ARRAY(SELECT event_id FROM claimed)) AND t.event_id = claimed.event_id RETURNING ",
			strings.Replace(prefixedColumns("t."), "t.locked_by", "claimed.locked_by", 1))
		return b.query(), nil
	}
	b.w("UPDATE ", table, " SET locked_by = ", b.arg(p.Token), ", locked_until = ", d.dbTimeOffset(b, p.TTL),
		" WHERE event_id IN (SELECT event_id FROM ", table)
	if err := b.claimWhere(p); err != nil {
		return query{}, err
	}
	b.w(d.claimOrder(), " ").limit(int64(p.Limit)).w(") RETURNING ", selectColumns)
	return b.query(), nil
}

// claimReadQuery builds the first statement of a claim in a transaction (MySQL): a
// plain read of the IDs of the rows to claim, in claim order, walking the pending index
// (FORCE INDEX, so that the optimizer never prefers a table scan and a sort). It locks
// nothing and sees only committed rows. A locking read of the index instead would meet
// the rows that open business transactions are inserting, and checking whether such a
// row is locked turns the inserting transaction's implicit lock on it into an explicit
// one, which InnoDB passes on as gap locks, the transaction being REPEATABLE READ, as
// the index changes around the row; DONE updates that insert into those gaps then
// wait until the business transaction ends (docs/databases.md,
// TestClaimTakesNoLockOfAnOpenWriter).
func (d *dialect) claimReadQuery(t tableName, p storage.ClaimParams, limit int, after *claimCursor) (query, error) {
	if err := p.Validate(); err != nil {
		return query{}, err
	}
	col := d.dueColumn
	b := d.newBuilder()
	b.w("SELECT event_id, ", col, ", created_at FROM ", d.qualified(t), " FORCE INDEX (", d.quote(t.indexName(pendingIndexSuffix)), ")")
	if err := b.claimWhere(p); err != nil {
		return query{}, err
	}
	if after != nil {
		b.dueKeysetAfter(col, after.due, after.created, after.id)
	}
	b.w(d.claimOrder(), " ").limit(int64(limit))
	return b.query(), nil
}

// claimCursor is where a claim's read of the pending index stopped: the last row's
// due time, created_at and ID, as the database returned them.
type claimCursor struct {
	due, created any
	id           string
}

// claimLockQuery builds the second statement of a claim in a transaction: a locking
// read, by primary key, of the rows among ids (read by claimReadQuery) that still match
// the claim predicate, skipping rows other transactions hold. Besides the event columns
// it reads the claim's expiry, the database's current time plus p.TTL, which the update
// then writes.
func (d *dialect) claimLockQuery(t tableName, p storage.ClaimParams, ids []string) (query, error) {
	if err := p.Validate(); err != nil {
		return query{}, err
	}
	b := d.newBuilder()
	b.w("SELECT ", selectColumns, ", ", d.dbTimeOffset(b, p.TTL), " FROM ", d.byID(t))
	if err := b.claimWhere(p); err != nil {
		return query{}, err
	}
	b.w(" AND ").matchIDs(ids).w(d.claimOrder(), " FOR UPDATE SKIP LOCKED")
	return b.query(), nil
}

// claimUpdateQueries builds the second statement of a claim in a transaction: it marks
// the locked rows, by primary key, one statement per chunk of IDs.
func (d *dialect) claimUpdateQueries(t tableName, token string, until any, ids []string) []query {
	var qs []query
	for _, chunk := range d.chunkIDs(ids) {
		b := d.newBuilder()
		b.w("UPDATE ", d.byID(t), " SET locked_by = ", b.arg(token), ", locked_until = ", b.arg(until), " WHERE ")
		qs = append(qs, b.matchIDs(chunk).query())
	}
	return qs
}

// renewClaimQuery builds [ClaimStore.RenewClaim]: the row's expiry moves to the database's
// current time plus p.TTL while p.Token still holds it.
func (d *dialect) renewClaimQuery(t tableName, p storage.RenewClaimParams) (query, error) {
	if err := p.Validate(); err != nil {
		return query{}, err
	}
	b := d.newBuilder()
	b.w("UPDATE ", d.qualified(t), " SET locked_until = ", d.dbTimeOffset(b, p.TTL),
		" WHERE event_id = ", b.arg(p.ID), " AND locked_by = ", b.arg(p.Token), " AND status IN (", pendingStatuses(), ")")
	return b.query(), nil
}

// prefixedColumns returns selectColumns with each column qualified by prefix.
func prefixedColumns(prefix string) string {
	return prefix + strings.ReplaceAll(selectColumns, ", ", ", "+prefix)
}
