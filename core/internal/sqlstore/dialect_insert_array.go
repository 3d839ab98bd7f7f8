package sqlstore

import (
	"strconv"
	"strings"
	"time"

	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// The event INSERT of a dialect with arrayInsert (PostgreSQL): one array argument per
// column, read back as rows by unnest, so that the statement's text does not depend on
// the batch's size. A multi-row VALUES binds about ten arguments per row (nearly 2,000
// for 100 events), each encoded by the driver and bound by the server, and its text
// changes with the number of rows, so each batch size is a statement of its own to
// prepare and plan. This statement binds at most arrayInsertMaxArgs, whatever the
// batch, few enough for any statement cache (maxCachedArgs), and one text serves every
// batch size.

// arrayInsertMaxRows bounds the rows of one array INSERT, as the bind limit bounded a
// VALUES list (65,535 arguments, about 5,000 rows), so that one argument stays a few
// megabytes for ordinary payloads.
const arrayInsertMaxRows = 5000

// arrayInsertMaxArgs is the most arguments an array INSERT binds: an array for each of
// the fourteen columns it takes from the events (all but attempts and locked_until;
// status only in a batch with ordered events), one that marks the rows deciding their
// status, and the claim TTL.
const arrayInsertMaxArgs = 16

// insertArrayQueries is insertQueriesBounded on a dialect with arrayInsert: one INSERT
// … SELECT … FROM unnest(…) per arrayInsertMaxRows events (or per maxBytes of
// arguments, when positive), whose rows are what insertRow would write. Its text
// depends only on which optional columns the batch writes (claims, order, listener)
// and on whether some row decides its status (candidates). A row that decides is NEW
// (and claimed) unless its key has an open event when the statement starts, as
// openKeyCase decides it in a VALUES row, but with an EXISTS correlated with the row's
// key: an EXISTS in the SELECT list stays a subplan, an index probe per row that
// decides, which sees the statement's snapshot (not the rows the statement inserts).
func (d *dialect) insertArrayQueries(t tableName, p storage.InsertParams, now time.Time, heads, candidates map[string]bool, maxBytes int) ([]query, error) {
	events := p.Events
	returnsStatus, _ := d.insertSkips(p, candidates) // more than one event: never by count
	var c arrayInsertColumns
	for i := range events {
		c.claims = c.claims || events[i].LockedBy != ""
		c.ordered = c.ordered || events[i].OrderKey != ""
		c.listeners = c.listeners || events[i].Listener != ""
		c.decide = c.decide || events[i].OrderKey != "" && candidates[events[i].ID]
	}
	var qs []query
	rows := make([]arrayInsertRow, 0, min(len(events), arrayInsertMaxRows))
	size, first := 0, 0
	flush := func(end int) {
		q := d.arrayInsertQuery(t, c, rows, size, p.ClaimTTL, returnsStatus)
		q.first, q.n = first, end-first
		qs = append(qs, q)
		rows, size, first = rows[:0], 0, end
	}
	for i, e := range events {
		r, rowSize, err := d.encodeInsertRow(i, e, now)
		if err != nil {
			return nil, err
		}
		if len(rows) > 0 && (len(rows) == arrayInsertMaxRows || maxBytes > 0 && size+rowSize > maxBytes) {
			flush(i)
		}
		row := arrayInsertRow{e: e, status: outboxtype.StatusNew, decide: e.OrderKey != "" && candidates[e.ID]}
		if e.OrderKey != "" && !heads[e.ID] && !row.decide {
			row.status = outboxtype.StatusWaiting // until promoted
			row.e.LockedBy = ""                   // and never claimed
		}
		row.headers, _ = r.headers.(string)
		row.availableAt, row.createdAt = r.availableAt.(time.Time), r.createdAt.(time.Time)
		rows = append(rows, row)
		size += rowSize
	}
	if len(rows) > 0 {
		flush(len(events))
	}
	return qs, nil
}

// arrayInsertColumns are the optional columns an array INSERT writes: the claim, order
// and listener columns (see insertColumns), and decide, the array of the rows that
// decide their status.
type arrayInsertColumns struct {
	claims, ordered, listeners, decide bool
}

// arrayInsertRow is one row of an array INSERT: NEW, or for an ordered event NEW (and
// claimed) when a head, deciding when decide, else WAITING and unclaimed (LockedBy
// cleared), as insertRow writes it.
type arrayInsertRow struct {
	e                      outboxtype.Event
	status                 outboxtype.Status
	decide                 bool
	headers                string    // "" for NULL (encodeHeaders)
	availableAt, createdAt time.Time // as the dialect encodes them
}

// arrayInsertArray is one array argument of an array INSERT: its element type, its
// name in unnest's column list, when the statement has it, and how a row's element is
// written.
type arrayInsertArray struct {
	name, typ string
	has       func(c arrayInsertColumns) bool // nil: always
	elem      func(sb *strings.Builder, r *arrayInsertRow)
}

// arrayInsertArrays are the arrays of an array INSERT, in their order.
var arrayInsertArrays = [...]arrayInsertArray{
	{"event_id", "TEXT", nil, func(sb *strings.Builder, r *arrayInsertRow) { appendArrayText(sb, r.e.ID) }},
	{"event_type", "TEXT", nil, func(sb *strings.Builder, r *arrayInsertRow) { appendArrayText(sb, r.e.Type) }},
	{"aggregate_type", "TEXT", nil, func(sb *strings.Builder, r *arrayInsertRow) { appendArrayText(sb, r.e.AggregateType) }},
	{"aggregate_id", "TEXT", nil, func(sb *strings.Builder, r *arrayInsertRow) { appendArrayOptional(sb, r.e.AggregateID) }},
	{"tenant_id", "TEXT", nil, func(sb *strings.Builder, r *arrayInsertRow) { appendArrayOptional(sb, r.e.TenantID) }},
	{"payload", "JSONB", nil, func(sb *strings.Builder, r *arrayInsertRow) { appendArrayText(sb, string(r.e.Payload)) }},
	{"headers", "JSONB", nil, func(sb *strings.Builder, r *arrayInsertRow) { appendArrayOptional(sb, r.headers) }},
	{"status", "SMALLINT", func(c arrayInsertColumns) bool { return c.ordered },
		func(sb *strings.Builder, r *arrayInsertRow) { sb.WriteString(sqlStatus(r.status)) }},
	{"available_at", "TIMESTAMPTZ", nil, func(sb *strings.Builder, r *arrayInsertRow) { appendArrayTime(sb, r.availableAt) }},
	{"created_at", "TIMESTAMPTZ", nil, func(sb *strings.Builder, r *arrayInsertRow) { appendArrayTime(sb, r.createdAt) }},
	{"locked_by", "TEXT", func(c arrayInsertColumns) bool { return c.claims },
		func(sb *strings.Builder, r *arrayInsertRow) { appendArrayOptional(sb, r.e.LockedBy) }},
	{"order_key", "TEXT", func(c arrayInsertColumns) bool { return c.ordered },
		func(sb *strings.Builder, r *arrayInsertRow) { appendArrayOptional(sb, r.e.OrderKey) }},
	{"order_seq", "BIGINT", func(c arrayInsertColumns) bool { return c.ordered }, func(sb *strings.Builder, r *arrayInsertRow) {
		if r.e.OrderKey == "" {
			sb.WriteString("NULL")
		} else {
			sb.WriteString(strconv.FormatInt(r.e.OrderSeq, 10))
		}
	}},
	{"listener", "TEXT", func(c arrayInsertColumns) bool { return c.listeners },
		func(sb *strings.Builder, r *arrayInsertRow) { appendArrayOptional(sb, r.e.Listener) }},
	{"decide", "BOOLEAN", func(c arrayInsertColumns) bool { return c.decide },
		func(sb *strings.Builder, r *arrayInsertRow) { sb.WriteString(strconv.FormatBool(r.decide)) }},
}

// arrayInsertQuery builds the array INSERT of rows, whose arguments take about size
// bytes (insertRowSize), with the columns c.
func (d *dialect) arrayInsertQuery(t tableName, c arrayInsertColumns, rows []arrayInsertRow, size int, claimTTL time.Duration, returnsStatus bool) query {
	// Every array literal is a piece of one string, one allocation for them all.
	var lits strings.Builder
	lits.Grow(size + size/4 + len(rows)*(2*len(arrayInsertArrays)+2*len(`"2006-01-02 15:04:05.000000+00"`)) + 2*len(arrayInsertArrays))
	var ends [len(arrayInsertArrays)]int
	for i, a := range arrayInsertArrays {
		if a.has == nil || a.has(c) {
			lits.WriteByte('{')
			for j := range rows {
				if j > 0 {
					lits.WriteByte(',')
				}
				a.elem(&lits, &rows[j])
			}
			lits.WriteByte('}')
		}
		ends[i] = lits.Len()
	}
	all := lits.String()

	columns, _ := insertColumns(c.claims, c.ordered, c.listeners)
	b := d.newBuilder()
	b.sb.Grow(1024) // the text's usual length, grown once
	b.returnsStatus = returnsStatus
	// blocked is true on a row that decides and whose key has an open event (not DONE,
	// FALLBACK or DISCARDED), else NULL or false.
	var blocked string
	status := sqlStatus(outboxtype.StatusNew)
	switch {
	case c.decide:
		blocked = "CASE WHEN u.decide THEN EXISTS (SELECT 1 FROM " + d.qualified(t) + " o WHERE o.order_key = u.order_key" + d.orderOpen("o") + ") END"
		status = "CASE WHEN " + blocked + " THEN " + sqlStatus(outboxtype.StatusWaiting) + " ELSE u.status END"
	case c.ordered:
		status = "u.status"
	}
	b.w("INSERT INTO ", d.qualified(t), " (", columns, ") SELECT u.event_id, u.event_type, u.aggregate_type, u.aggregate_id, u.tenant_id, u.payload, u.headers, ",
		status, ", 0, u.available_at, u.created_at")
	if c.claims {
		if c.decide {
			b.w(", CASE WHEN ", blocked, " THEN NULL ELSE u.locked_by END, CASE WHEN u.locked_by IS NULL THEN NULL WHEN ", blocked, " THEN NULL ELSE ")
		} else {
			b.w(", u.locked_by, CASE WHEN u.locked_by IS NULL THEN NULL ELSE ")
		}
		b.w(d.dbTimeOffset(b, claimTTL), " END")
	}
	if c.ordered {
		b.w(", u.order_key, u.order_seq")
	}
	if c.listeners {
		b.w(", u.listener")
	}
	b.w(" FROM unnest(")
	start, n := 0, 0
	for i, a := range arrayInsertArrays {
		if ends[i] == start {
			continue // not in this statement
		}
		if n > 0 {
			b.w(", ")
		}
		b.w("CAST(", b.arg(all[start:ends[i]]), " AS ", a.typ, "[])")
		start = ends[i]
		n++
	}
	b.w(") AS u (")
	n = 0
	for _, a := range arrayInsertArrays {
		if a.has == nil || a.has(c) {
			if n > 0 {
				b.w(", ")
			}
			b.w(a.name)
			n++
		}
	}
	b.w(")")
	return b.query()
}

// appendArrayOptional writes s as an array element, NULL for "" (nullString's mapping).
func appendArrayOptional(sb *strings.Builder, s string) {
	if s == "" {
		sb.WriteString("NULL")
	} else {
		appendArrayText(sb, s)
	}
}

// appendArrayTime writes t, a time the dialect encoded (UTC, truncated to microseconds),
// as an array element in PostgreSQL's ISO form, which timestamptz's input reads in any
// DateStyle; the years before 1 are BC (Go's year 0 is 1 BC), as timestamptz has them.
func appendArrayTime(sb *strings.Builder, t time.Time) {
	year, bc := t.Year(), false
	if year <= 0 {
		year, bc = 1-year, true
	}
	var buf [48]byte
	out := append(buf[:0], '"')
	out = appendPadded(out, year, 4)
	out = append(out, '-')
	out = appendPadded(out, int(t.Month()), 2)
	out = append(out, '-')
	out = appendPadded(out, t.Day(), 2)
	out = append(out, ' ')
	out = appendPadded(out, t.Hour(), 2)
	out = append(out, ':')
	out = appendPadded(out, t.Minute(), 2)
	out = append(out, ':')
	out = appendPadded(out, t.Second(), 2)
	out = append(out, '.')
	out = appendPadded(out, t.Nanosecond()/1000, 6)
	out = append(out, "+00"...)
	if bc {
		out = append(out, " BC"...)
	}
	sb.Write(append(out, '"'))
}

// appendPadded appends n, at least width digits, zero-padded.
func appendPadded(b []byte, n, width int) []byte {
	start := len(b)
	b = strconv.AppendInt(b, int64(n), 10)
	for len(b)-start < width {
		b = append(b, 0)
		copy(b[start+1:], b[start:])
		b[start] = '0'
	}
	return b
}

// appendArrayText writes s as a quoted array element, with its quotes and backslashes
// escaped.
func appendArrayText(sb *strings.Builder, s string) {
	sb.WriteByte('"')
	for {
		i := strings.IndexAny(s, `"\\`)
		if i < 0 {
			break
		}
		sb.WriteString(s[:i])
		sb.WriteByte('\\')
		sb.WriteByte(s[i])
		s = s[i+1:]
	}
	sb.WriteString(s)
	sb.WriteByte('"')
}
