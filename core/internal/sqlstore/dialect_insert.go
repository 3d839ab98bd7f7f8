package sqlstore

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/outboxkit/outbox/core/internal/check"
	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// The event INSERT: one multi-row statement per batch (or several, below the bind and
// size limits), each row NEW, or for an ordered event NEW, WAITING or decided by the
// statement itself (see orderStrategy). On PostgreSQL the rows are arrays, one per
// column, instead of a VALUES list (dialect_insert_array.go).

// insertParamsPerRow is the number of arguments one inserted row binds; a claimed batch
// binds two more per row (the token and the claim TTL).
const insertParamsPerRow = 9

// insertQueries builds one multi-row INSERT for p.Events, or several when the batch would
// exceed the dialect's bind-parameter limit or its statement size bound. New rows are
// NEW with no attempts, whatever the events' Status and Attempts say. A zero CreatedAt
// becomes now and a zero AvailableAt the later of CreatedAt and now. When an event has LockedBy set,
// the statement also writes locked_by and locked_until: the token and the database's
// current time plus p.ClaimTTL for claimed rows, NULL for the others.
func (d *dialect) insertQueries(t tableName, p storage.InsertParams, now time.Time) ([]query, error) {
	return d.insertQueriesHeads(t, p, now, nil, nil)
}

// insertQueriesHeads is insertQueries where the ordered events whose IDs are in heads
// are inserted NEW, claimed when they have LockedBy, the ordered events whose IDs are
// in candidates NEW (and claimed) only if their key has no open event (not DONE,
// FALLBACK or DISCARDED) when the statement starts, else WAITING (see postgresOrder;
// such a statement returns its rows' statuses), and the other ordered events WAITING
// and unclaimed.
func (d *dialect) insertQueriesHeads(t tableName, p storage.InsertParams, now time.Time, heads, candidates map[string]bool) ([]query, error) {
	return d.insertQueriesBounded(t, p, now, heads, candidates, d.maxStatementBytes)
}

// insertQueriesBounded is insertQueriesHeads with maxBytes, when positive, in place of
// the dialect's maxStatementBytes (a store's bound from the server's packet limit).
func (d *dialect) insertQueriesBounded(t tableName, p storage.InsertParams, now time.Time, heads, candidates map[string]bool, maxBytes int) ([]query, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	// One event stays a one-row VALUES: its arguments fit the statement cache, and the
	// arrays' text encoding made a single write slower (issue 55's A/B, BENCHMARKS.md).
	if d.arrayInsert && len(p.Events) > 1 {
		return d.insertArrayQueries(t, p, now, heads, candidates, maxBytes)
	}
	events := p.Events
	returnsStatus, skipsByCount := d.insertSkips(p, candidates)
	claims, ordered, listeners := false, false, false
	for i := range events {
		claims = claims || events[i].LockedBy != ""
		ordered = ordered || events[i].OrderKey != ""
		listeners = listeners || events[i].Listener != ""
	}
	columns, rowArgs := insertColumns(claims, ordered, listeners)
	var qs []query
	var b *builder
	size, first := 0, 0
	for i, e := range events {
		r, rowSize, err := d.encodeInsertRow(i, e, now)
		if err != nil {
			return nil, err
		}
		if b != nil && (len(b.args)+rowArgs > d.maxBindParams || maxBytes > 0 && size+rowSize > maxBytes) {
			qs = append(qs, b.query())
			qs[len(qs)-1].first, qs[len(qs)-1].n = first, i-first
			b = nil
		}
		if b == nil {
			b = d.newBuilder().w("INSERT INTO ", d.qualified(t), " (", columns, ") VALUES ")
			b.returnsStatus, b.skipsByCount = returnsStatus, skipsByCount
			size, first = 0, i
		} else {
			b.w(", ")
		}
		r.claims, r.ordered, r.listeners = claims, ordered, listeners
		r.head, r.decide, r.seq = heads[e.ID], e.OrderKey != "" && candidates[e.ID], e.OrderSeq
		b.insertRow(t, e, p.ClaimTTL, r)
		size += rowSize
	}
	if b != nil {
		qs = append(qs, b.query())
		qs[len(qs)-1].first, qs[len(qs)-1].n = first, len(events)-first
	}
	return qs, nil
}

// insertSkips returns how the event INSERTs of p skip the events whose ID exists, on a
// dialect with skipExisting: returnsStatus, by returning the rows they insert, which
// they must when some row decides its status (candidates); skipsByCount, a single
// event's, by the count of rows it affected, which spares the server a row to return
// and the client a result to read. Neither skips when p.NewIDs says no ID can exist (a
// plain INSERT: no conflict check for the server), nor on a dialect without
// skipExisting (insertSkipping).
func (d *dialect) insertSkips(p storage.InsertParams, candidates map[string]bool) (returnsStatus, skipsByCount bool) {
	switch {
	case d.skipExisting == "":
		return false, false
	case len(candidates) > 0:
		return true, false
	case p.NewIDs || d.skipOnlyDeciding:
		return false, false
	case len(p.Events) == 1:
		return false, true
	}
	return true, false
}

// encodeInsertRow encodes events[i] = e for an INSERT (encodeRow) and returns the bytes
// its row adds to the statement (insertRowSize).
func (d *dialect) encodeInsertRow(i int, e outboxtype.Event, now time.Time) (insertRow, int, error) {
	if e.ID == "" {
		return insertRow{}, 0, check.Invalid("insert", "event %d has no ID", i)
	}
	r, err := d.encodeRow(e, now)
	if err != nil {
		return insertRow{}, 0, err
	}
	return r, insertRowSize(e, r.headers), nil
}

// insertColumns returns the column list of an event INSERT, with the optional columns
// it writes, and how many arguments a row binds at least.
func insertColumns(claims, ordered, listeners bool) (string, int) {
	columns := "event_id, event_type, aggregate_type, aggregate_id, tenant_id, payload, headers, status, attempts, available_at, created_at"
	rowArgs := insertParamsPerRow
	if claims {
		columns += ", locked_by, locked_until"
		rowArgs += 2
	}
	if ordered {
		columns += ", order_key, order_seq"
		rowArgs += 2
	}
	if listeners {
		columns += ", listener"
		rowArgs++
	}
	return columns, rowArgs
}

// insertRow is how builder.insertRow writes one row of an INSERT's VALUES.
type insertRow struct {
	claims, ordered, listeners bool // the statement writes the claim, order, listener columns
	// head: the ordered event is NEW (and claimed when it has LockedBy); decide: it is
	// NEW (and claimed) only if its key has no open event (not DONE, FALLBACK or
	// DISCARDED) when the statement starts, else WAITING; else an ordered event is
	// WAITING and unclaimed.
	head, decide bool
	// typed casts every value to its column's PostgreSQL type, for a VALUES list that a
	// SELECT reads (insertByVersionQuery), where a bare parameter or NULL would be text.
	typed bool
	// carried, when set (insertCarriedQuery), makes the event_id's value NULL unless
	// the row's key has no open event and its key row's last_seq is *carried.
	carried *int64
	// The encoded values of the columns that are not the event's own fields.
	headers, availableAt, createdAt, seq any
}

// encodeRow encodes e's headers and times for insertRow, a zero CreatedAt as now and a
// zero AvailableAt as the later of CreatedAt and now: an event is due from its write,
// where the poller's low-water mark reads it (core/internal/poll/lowwater.go).
func (d *dialect) encodeRow(e outboxtype.Event, now time.Time) (insertRow, error) {
	var r insertRow
	var err error
	if r.headers, err = encodeHeaders(e.Headers); err != nil {
		return r, fmt.Errorf("event %s: %w", e.ID, err)
	}
	if e.CreatedAt.IsZero() {
		e.CreatedAt = now
	}
	if e.AvailableAt.IsZero() { // due from the write, or from CreatedAt if later
		e.AvailableAt = e.CreatedAt
		if now.After(e.AvailableAt) {
			e.AvailableAt = now
		}
	}
	if r.availableAt, err = d.time(e.AvailableAt); err != nil {
		return r, fmt.Errorf("event %s: AvailableAt: %w", e.ID, err)
	}
	if r.createdAt, err = d.time(e.CreatedAt); err != nil {
		return r, fmt.Errorf("event %s: CreatedAt: %w", e.ID, err)
	}
	return r, nil
}

// insertRow writes the values of e as one row, in insertQueriesHeads' column order.
func (b *builder) insertRow(t tableName, e outboxtype.Event, claimTTL time.Duration, r insertRow) {
	cast := func(v, typ string) string {
		if r.typed {
			return "CAST(" + v + " AS " + typ + ")"
		}
		return v
	}
	status := outboxtype.StatusNew
	if e.OrderKey != "" && !r.head && !r.decide {
		status = outboxtype.StatusWaiting // until promoted
		e.LockedBy = ""                   // and never claimed
	}
	var id string
	if r.carried == nil {
		id = cast(b.arg(e.ID), "TEXT")
	} else {
		id = "CASE WHEN NOT EXISTS (SELECT 1 FROM " + b.d.qualified(t) + " o WHERE o.order_key = " + b.arg(e.OrderKey) + b.d.orderOpen("o") +
			") AND (SELECT k.last_seq FROM " + b.d.qualified(keyTable(t)) + " k WHERE k.order_key = " + b.arg(e.OrderKey) + ") = " + b.arg(*r.carried) +
			" THEN " + b.arg(e.ID) + " END"
	}
	b.w("(", id, ", ", cast(b.arg(e.Type), "TEXT"), ", ", cast(b.arg(e.AggregateType), "TEXT"), ", ",
		cast(b.arg(nullString(e.AggregateID)), "TEXT"), ", ", cast(b.arg(nullString(e.TenantID)), "TEXT"), ", ",
		cast(b.arg(string(e.Payload)), "JSONB"), ", ", cast(b.arg(r.headers), "JSONB"))
	if r.decide {
		// One uncorrelated EXISTS per column (an init plan each, an index probe).
		b.w(", ").openKeyCase(t, e.OrderKey, sqlStatus(outboxtype.StatusWaiting), func() string { return sqlStatus(outboxtype.StatusNew) }).w(", 0, ")
	} else {
		b.w(", ", sqlStatus(status), ", 0, ") // status, attempts
	}
	b.w(cast(b.arg(r.availableAt), "TIMESTAMPTZ"), ", ", cast(b.arg(r.createdAt), "TIMESTAMPTZ"))
	switch {
	case e.LockedBy != "" && r.decide:
		b.w(", ").openKeyCase(t, e.OrderKey, "NULL", func() string { return b.arg(e.LockedBy) })
		b.w(", ").openKeyCase(t, e.OrderKey, "NULL", func() string { return b.d.dbTimeOffset(b, claimTTL) })
	case e.LockedBy != "":
		b.w(", ", b.arg(e.LockedBy), ", ", b.d.dbTimeOffset(b, claimTTL))
	case r.claims:
		b.w(", ", cast("NULL", "TEXT"), ", ", cast("NULL", "TIMESTAMPTZ"))
	}
	switch {
	case e.OrderKey != "":
		b.w(", ", cast(b.arg(e.OrderKey), "TEXT"), ", ", cast(b.arg(r.seq), "BIGINT"))
	case r.ordered:
		b.w(", NULL, NULL")
	}
	if r.listeners {
		b.w(", ", cast(b.arg(nullString(e.Listener)), "TEXT"))
	}
	b.w(")")
}

// openKeyCase writes a CASE that is open when key has an open event (not DONE,
// FALLBACK or DISCARDED), else closed(), whose arguments follow key's.
func (b *builder) openKeyCase(t tableName, key, open string, closed func() string) *builder {
	return b.w("CASE WHEN EXISTS (SELECT 1 FROM ", b.d.qualified(t), " WHERE order_key = ", b.arg(key), " AND ", orderOpenStatus(), ") THEN ",
		open, " ELSE ", closed(), " END")
}

// insertRowSize approximates the bytes one row's arguments take on the wire: its text
// columns plus 32 bytes for the two times.
func insertRowSize(e outboxtype.Event, headers any) int {
	n := len(e.OrderKey) + len(e.Listener) + len(e.ID) + len(e.Type) + len(e.AggregateType) + len(e.AggregateID) + len(e.TenantID) + len(e.Payload) + 32
	if h, ok := headers.(string); ok {
		n += len(h)
	}
	return n
}

// encodeHeaders returns the headers column: NULL when there are none, else a JSON object.
func encodeHeaders(h map[string]string) (any, error) {
	if len(h) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("encode headers: %w", err)
	}
	return string(b), nil
}

// nullString maps "" to NULL for optional columns.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}
