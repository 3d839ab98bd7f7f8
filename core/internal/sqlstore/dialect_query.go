package sqlstore

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/outboxkit/outbox/core/internal/check"
	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// query is one statement with its arguments.
type query struct {
	SQL  string
	Args []any
	// returnsStatus marks an INSERT that returns event_id and status of every row it
	// inserts (dialect.skipExisting): it decides the status of some of its rows (the
	// candidates of insertQueriesHeads), and it skips rows whose ID exists.
	returnsStatus bool
	// first and n are the events of InsertParams.Events an INSERT writes: n of them
	// from index first.
	first, n int
}

// builder accumulates SQL text and arguments; arg returns the placeholder for a value.
type builder struct {
	d    *dialect
	sb   strings.Builder
	args []any
	// returnsStatus: see query.returnsStatus.
	returnsStatus bool
}

func (d *dialect) newBuilder() *builder { return &builder{d: d} }

func (b *builder) w(parts ...string) *builder {
	for _, p := range parts {
		b.sb.WriteString(p)
	}
	return b
}

func (b *builder) arg(v any) string {
	b.args = append(b.args, v)
	return b.d.bindVar(len(b.args))
}

// limit writes "LIMIT n": n bound as an argument, or, with literalLimit, written as an
// integer literal.
func (b *builder) limit(n int64) *builder {
	if b.d.literalLimit {
		return b.w("LIMIT ", strconv.FormatInt(n, 10))
	}
	return b.w("LIMIT ", b.arg(n))
}

func (b *builder) query() query {
	q := query{SQL: b.sb.String(), Args: b.args, returnsStatus: b.returnsStatus}
	if q.returnsStatus {
		q.SQL += b.d.skipExisting + " RETURNING event_id, status"
	}
	return q
}

// selectColumns are the columns every event SELECT reads, in the order rawRow.decode
// expects.
const selectColumns = "event_id, event_type, aggregate_type, aggregate_id, tenant_id, payload, headers, " +
	"status, attempts, last_error, available_at, created_at, done_at, locked_by, locked_until, order_key, order_seq, " +
	"first_attempt_at, listener"

// insertParamsPerRow is the number of arguments one inserted row binds; a claimed batch
// binds two more per row (the token and the claim TTL).
const insertParamsPerRow = 9

// insertQueries builds one multi-row INSERT for p.Events, or several when the batch would
// exceed the dialect's bind-parameter limit or its statement size bound. New rows are
// NEW with no attempts, whatever the events' Status and Attempts say. A zero CreatedAt
// becomes now and a zero AvailableAt becomes CreatedAt. When an event has LockedBy set,
// the statement also writes locked_by and locked_until: the token and the database's
// current time plus p.ClaimTTL for claimed rows, NULL for the others.
func (d *dialect) insertQueries(t tableName, p storage.InsertParams, now time.Time) ([]query, error) {
	return d.insertQueriesHeads(t, p, now, nil, nil)
}

// insertQueriesHeads is insertQueries where the ordered events whose IDs are in heads
// are inserted NEW, claimed when they have LockedBy, the ordered events whose IDs are
// in candidates NEW (and claimed) only if their key has no event that is not DONE
// when the statement starts, else WAITING (see dialect.headInInsert; such a statement
// returns its rows' statuses), and the other ordered events WAITING and unclaimed.
func (d *dialect) insertQueriesHeads(t tableName, p storage.InsertParams, now time.Time, heads, candidates map[string]bool) ([]query, error) {
	return d.insertQueriesBounded(t, p, now, heads, candidates, d.maxStatementBytes)
}

// insertQueriesBounded is insertQueriesHeads with maxBytes, when positive, in place of
// the dialect's maxStatementBytes (a store's bound from the server's packet limit).
func (d *dialect) insertQueriesBounded(t tableName, p storage.InsertParams, now time.Time, heads, candidates map[string]bool, maxBytes int) ([]query, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	events := p.Events
	returnsStatus := d.skipExisting != "" && (!d.skipOnlyDeciding || len(candidates) > 0)
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
		if e.ID == "" {
			return nil, check.Invalid("insert", "event %d has no ID", i)
		}
		r, err := d.encodeRow(e, now)
		if err != nil {
			return nil, err
		}
		rowSize := insertRowSize(e, r.headers)
		if b != nil && (len(b.args)+rowArgs > d.maxBindParams || maxBytes > 0 && size+rowSize > maxBytes) {
			qs = append(qs, b.query())
			qs[len(qs)-1].first, qs[len(qs)-1].n = first, i-first
			b = nil
		}
		if b == nil {
			b = d.newBuilder().w("INSERT INTO ", d.qualified(t), " (", columns, ") VALUES ")
			b.returnsStatus = returnsStatus
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
	// NEW (and claimed) only if its key has no event that is not DONE when the statement
	// starts, else WAITING; else an ordered event is WAITING and unclaimed.
	head, decide bool
	// typed casts every value to its column's PostgreSQL type, for a VALUES list that a
	// SELECT reads (dialect.headByVersion), where a bare parameter or NULL would be text.
	typed bool
	// carried, when set (insertCarriedQuery), makes the event_id's value NULL unless
	// the row's key has no open event and its key row's last_seq is *carried.
	carried *int64
	// The encoded values of the columns that are not the event's own fields.
	headers, availableAt, createdAt, seq any
}

// encodeRow encodes e's headers and times for insertRow, a zero CreatedAt as now and a
// zero AvailableAt as CreatedAt.
func (d *dialect) encodeRow(e outboxtype.Event, now time.Time) (insertRow, error) {
	var r insertRow
	var err error
	if r.headers, err = encodeHeaders(e.Headers); err != nil {
		return r, fmt.Errorf("event %s: %w", e.ID, err)
	}
	if e.CreatedAt.IsZero() {
		e.CreatedAt = now
	}
	if e.AvailableAt.IsZero() {
		e.AvailableAt = e.CreatedAt
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
	status := ", 0, 0, "
	if e.OrderKey != "" && !r.head && !r.decide {
		status = ", 4, 0, " // WAITING until promoted
		e.LockedBy = ""     // and never claimed
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
		b.w(", ").openKeyCase(t, e.OrderKey, "4", func() string { return "0" }).w(", 0, ")
	} else {
		b.w(status)
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

// openKeyCase writes a CASE that is open when key has an event that is not DONE, else
// closed(), whose arguments follow key's.
func (b *builder) openKeyCase(t tableName, key, open string, closed func() string) *builder {
	return b.w("CASE WHEN EXISTS (SELECT 1 FROM ", b.d.qualified(t), " WHERE order_key = ", b.arg(key), " AND ", orderOpenStatus, ") THEN ",
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

// chunkIDs splits ids into lists of at most the dialect's maxIDs.
func (d *dialect) chunkIDs(ids []string) [][]string {
	var out [][]string
	for start := 0; start < len(ids); start += d.maxIDs {
		out = append(out, ids[start:min(start+d.maxIDs, len(ids))])
	}
	return out
}

// matchIDs writes a predicate matching event_id against ids.
func (b *builder) matchIDs(ids []string) *builder {
	if b.d.idsAsArray {
		return b.w("event_id = ANY(CAST(", b.arg(textArrayLiteral(ids)), " AS TEXT[]))")
	}
	b.w("event_id IN (")
	for i, id := range ids {
		if i > 0 {
			b.w(", ")
		}
		b.w(b.arg(id))
	}
	return b.w(")")
}

// matchIDTokens writes a predicate matching the rows of t whose event_id is ids[i] and
// whose claim token (locked_by) is tokens[i], for some i: each row fenced by its own
// claim. Both forms find the rows by primary key. MySQL and SQLite compare row values
// with a list of pairs.
//
// PostgreSQL walks the pairs and looks each row up by primary key, locking it, in a
// LATERAL subquery that the planner cannot turn around, then changes the rows by that
// list of IDs. A semi-join of the table with the pairs ("(event_id, locked_by) IN
// (SELECT * FROM unnest(…))") lets the planner put the table on the outer side, which
// it does when its statistics say no row is NEW, RETRY or DEAD (an outbox table whose
// rows are almost all DONE, analyzed before a backlog built up): a scan of every
// pending row, each compared with every pair, 0.25 s for 467 pairs against 3,000
// pending rows instead of 3 ms, and seconds under load
// (TestPostgresTokenFencesDriveFromTheIDs). The lock (FOR NO KEY UPDATE, the one an
// update takes anyway; a delete strengthens its own) keeps each row's token as the
// subquery checked it, on the row's latest version, until the statement ends. The
// pairs are sorted by ID, so that two statements lock the rows they share in one order.
func (b *builder) matchIDTokens(t tableName, ids, tokens []string) *builder {
	if b.d.idsAsArray {
		ids, tokens = sortedPairs(ids, tokens)
		return b.w("event_id = ANY(ARRAY(SELECT m.event_id FROM unnest(CAST(", b.arg(textArrayLiteral(ids)),
			" AS TEXT[]), CAST(", b.arg(textArrayLiteral(tokens)), " AS TEXT[])) AS u (id, tok), LATERAL (SELECT x.event_id FROM ",
			b.d.qualified(t), " AS x WHERE x.event_id = u.id AND x.locked_by = u.tok FOR NO KEY UPDATE) AS m))")
	}
	b.w("(event_id, locked_by) IN (")
	for i := range ids {
		if i > 0 {
			b.w(", ")
		}
		b.w("(", b.arg(ids[i]), ", ", b.arg(tokens[i]), ")")
	}
	return b.w(")")
}

// sortedPairs returns ids and tokens sorted together by ID, in new slices.
func sortedPairs(ids, tokens []string) ([]string, []string) {
	order := make([]int, len(ids))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(ids[a], ids[b]) })
	sids, stoks := make([]string, len(ids)), make([]string, len(ids))
	for i, j := range order {
		sids[i], stoks[i] = ids[j], tokens[j]
	}
	return sids, stoks
}

// textArrayLiteral encodes ids as a PostgreSQL array literal, {"a","b"}. Sent as a plain
// string and cast in SQL, it needs no driver support for arrays.
func textArrayLiteral(ids []string) string {
	var sb strings.Builder
	sb.WriteByte('{')
	for i, id := range ids {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteByte('"')
		for j := 0; j < len(id); j++ {
			if c := id[j]; c == '"' || c == '\\' {
				sb.WriteByte('\\')
			}
			sb.WriteByte(id[j])
		}
		sb.WriteByte('"')
	}
	sb.WriteByte('}')
	return sb.String()
}

// clearClaim is appended to every status change: a row that changes state is no longer
// claimed by a poller.
const clearClaim = ", locked_by = NULL, locked_until = NULL"

// fence writes the WHERE conditions every outcome update shares: the row is not DONE
// (nor WAITING behind an earlier event of its key) and, when token is set, still
// claimed by it.
func (b *builder) fence(token string) *builder {
	b.w(" AND status IN (0, 2, 3)")
	if token != "" {
		b.w(" AND locked_by = ", b.arg(token))
	}
	return b
}

// markDoneQueries builds the fenced updates of [Store.MarkDone], one per chunk of IDs.
func (d *dialect) markDoneQueries(t tableName, p storage.MarkDoneParams) ([]query, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	doneAt, err := d.time(p.DoneAt)
	if err != nil {
		return nil, fmt.Errorf("DoneAt: %w", err)
	}
	var qs []query
	if p.Delete && d.claimInTx {
		// MySQL: one DELETE by primary key equality a row. A DELETE with an IN list
		// reads the index record after its last key (and may scan a small table), and
		// waits for any row it reads that another transaction holds: a business
		// transaction's uncommitted insert of a newer event, for one.
		for i, id := range p.IDs {
			b := d.newBuilder()
			b.w("DELETE FROM ", d.qualified(t), " WHERE event_id = ", b.arg(id))
			token := p.Token
			if p.Tokens != nil {
				token = p.Tokens[i]
			}
			qs = append(qs, b.fence(token).query())
		}
		return qs, nil
	}
	if p.Tokens != nil {
		// Two arguments per row, besides done_at (PostgreSQL binds two arrays).
		size := min(d.maxIDs, (d.maxBindParams-1)/2)
		for start := 0; start < len(p.IDs); start += size {
			end := min(start+size, len(p.IDs))
			b := d.newBuilder()
			b.markDone(t, p.Delete, doneAt)
			b.matchIDTokens(t, p.IDs[start:end], p.Tokens[start:end]).fence("")
			qs = append(qs, b.query())
		}
		return qs, nil
	}
	for _, ids := range d.chunkIDs(p.IDs) {
		b := d.newBuilder()
		b.markDone(t, p.Delete, doneAt)
		b.matchIDs(ids).fence(p.Token)
		qs = append(qs, b.query())
	}
	return qs, nil
}

// fanOutMarkQueries builds the outcome statements of a split ([FanOutStore.FanOut]) of
// the events ids, each fenced by its own tokens[i] ("" for none), and reports the events
// they changed: on PostgreSQL and SQLite each statement returns its rows' IDs
// (RETURNING); on MySQL, which has no UPDATE … RETURNING, each is preceded by a locking
// read of the rows it will change (lock; nil elsewhere), in the same transaction.
func (d *dialect) fanOutMarkQueries(t tableName, ids, tokens []string, doneAt time.Time, del bool) (marks, locks []query, err error) {
	var plain, claimed, claimTokens []string
	for i, id := range ids {
		if tokens[i] == "" {
			plain = append(plain, id)
		} else {
			claimed, claimTokens = append(claimed, id), append(claimTokens, tokens[i])
		}
	}
	var groups []storage.MarkDoneParams
	if len(plain) > 0 {
		groups = append(groups, storage.MarkDoneParams{IDs: plain, DoneAt: doneAt, Delete: del})
	}
	if len(claimed) > 0 {
		groups = append(groups, storage.MarkDoneParams{IDs: claimed, Tokens: claimTokens, DoneAt: doneAt, Delete: del})
	}
	for _, g := range groups {
		qs, err := d.markDoneQueries(t, g)
		if err != nil {
			return nil, nil, err
		}
		if d.name != "mysql" {
			for i := range qs {
				qs[i].SQL += " RETURNING event_id"
			}
			marks = append(marks, qs...)
			continue
		}
		marks = append(marks, qs...)
		if g.Tokens != nil {
			size := min(d.maxIDs, (d.maxBindParams-1)/2)
			for start := 0; start < len(g.IDs); start += size {
				end := min(start+size, len(g.IDs))
				b := d.newBuilder().w("SELECT event_id FROM ", d.byID(t), " WHERE ")
				locks = append(locks, b.matchIDTokens(t, g.IDs[start:end], g.Tokens[start:end]).fence("").w(" FOR UPDATE").query())
			}
			continue
		}
		for _, chunk := range d.chunkIDs(g.IDs) {
			b := d.newBuilder().w("SELECT event_id FROM ", d.byID(t), " WHERE ")
			locks = append(locks, b.matchIDs(chunk).fence("").w(" FOR UPDATE").query())
		}
	}
	return marks, locks, nil
}

// markDone writes the start of a DONE outcome up to its WHERE: the update that marks
// the rows DONE, or with del their delete.
func (b *builder) markDone(t tableName, del bool, doneAt any) {
	if del {
		b.w("DELETE FROM ", b.d.qualified(t), " WHERE ")
		return
	}
	b.w("UPDATE ", b.d.byID(t), " SET status = 1, done_at = ", b.arg(doneAt), clearClaim, " WHERE ")
}

// releaseClaimsQueries builds the updates that clear the claims of the NEW and RETRY
// rows ids[i] still held by tokens[i], one per chunk.
func (d *dialect) releaseClaimsQueries(t tableName, ids, tokens []string) []query {
	size := min(d.maxIDs, d.maxBindParams/2)
	var qs []query
	for start := 0; start < len(ids); start += size {
		end := min(start+size, len(ids))
		b := d.newBuilder()
		b.w("UPDATE ", d.byID(t), " SET locked_by = NULL, locked_until = NULL WHERE ")
		b.matchIDTokens(t, ids[start:end], tokens[start:end]).w(" AND status IN (0, 2)")
		qs = append(qs, b.query())
	}
	return qs
}

// rescheduleQuery builds the fenced update of [Store.Reschedule].
func (d *dialect) rescheduleQuery(t tableName, p storage.RescheduleParams) (query, error) {
	if err := p.Validate(); err != nil {
		return query{}, err
	}
	availableAt, err := d.time(p.AvailableAt)
	if err != nil {
		return query{}, fmt.Errorf("AvailableAt: %w", err)
	}
	b := d.newBuilder()
	b.w("UPDATE ", d.qualified(t), " SET status = ", b.arg(int64(p.Status)), ", available_at = ", b.arg(availableAt))
	if p.CountAttempt {
		b.w(", attempts = attempts + 1", firstAttempt(d))
	}
	if p.LastError != "" {
		b.w(", last_error = ", b.arg(truncateLastError(p.LastError)))
	}
	b.w(clearClaim, " WHERE event_id = ", b.arg(p.ID)).fence(p.Token)
	return b.query(), nil
}

// markDeadQuery builds the fenced update of [Store.MarkDead].
func (d *dialect) markDeadQuery(t tableName, p storage.MarkDeadParams) (query, error) {
	if err := p.Validate(); err != nil {
		return query{}, err
	}
	deadAt, err := d.time(p.DeadAt)
	if err != nil {
		return query{}, fmt.Errorf("DeadAt: %w", err)
	}
	b := d.newBuilder()
	status := "3"
	if p.Fallback {
		status = "5"
	}
	b.w("UPDATE ", d.qualified(t), " SET status = ", status, ", done_at = ", b.arg(deadAt), ", last_error = ", b.arg(nullString(truncateLastError(p.Reason))))
	if p.CountAttempt {
		b.w(", attempts = attempts + 1", firstAttempt(d))
	}
	if p.Listener != "" {
		b.w(", listener = ", b.arg(p.Listener))
	}
	b.w(clearClaim, " WHERE event_id = ", b.arg(p.ID)).fence(p.Token)
	return b.query(), nil
}

// firstAttempt is the assignment that an update counting a failed attempt makes:
// first_attempt_at, when the first one was recorded, by the database clock.
func firstAttempt(d *dialect) string {
	return ", first_attempt_at = COALESCE(first_attempt_at, " + d.dbNow + ")"
}

// truncateLastError makes s storable as last_error: valid UTF-8 without NUL bytes (which
// PostgreSQL text rejects), at most MaxLastErrorLen bytes, cut on a character boundary.
func truncateLastError(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	if len(s) <= outboxtype.MaxLastErrorLen {
		return s
	}
	cut := outboxtype.MaxLastErrorLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// pendingQuery builds the poller's scan of [Store.Pending].
func (d *dialect) pendingQuery(t tableName, p storage.PendingParams) (query, error) {
	if err := p.Validate(); err != nil {
		return query{}, err
	}
	now, err := d.time(p.Now)
	if err != nil {
		return query{}, fmt.Errorf("Now: %w", err)
	}
	createdBefore, err := d.time(p.Now.Add(-p.SkipRecent))
	if err != nil {
		return query{}, fmt.Errorf("Now-SkipRecent: %w", err)
	}
	var after any
	if !p.After.IsZero() {
		if after, err = d.time(p.After.CreatedAt); err != nil {
			return query{}, fmt.Errorf("After: %w", err)
		}
	}
	b := d.newBuilder()
	b.w("SELECT ", selectColumns, " FROM ", d.qualified(t))
	if col := d.pollColumn; col != "" {
		// Both NULL unless the row is NEW or RETRY, so no status test is needed. The
		// index on (pollColumn, event_id) is forced: it is the query's order, and
		// walking it stops after the LIMIT, where the due index would sort every due row.
		b.w(" FORCE INDEX (", d.quote(t.indexName(pollIndexSuffix)), ") WHERE ", col, " <= ", b.arg(createdBefore),
			" AND ", d.dueColumn, " <= ", b.arg(now))
		b.keysetAfter(col, after, p.After.ID)
		b.w(" ORDER BY ", col, ", event_id ").limit(int64(p.Limit))
		return b.query(), nil
	}
	if col := d.dueColumn; col != "" {
		// NULL unless the row is NEW or RETRY, so no status test is needed.
		b.w(" WHERE ", col, " <= ", b.arg(now))
	} else {
		b.w(" WHERE status IN (0, 2) AND available_at <= ", b.arg(now))
	}
	b.w(" AND created_at <= ", b.arg(createdBefore))
	b.keysetAfter("created_at", after, p.After.ID)
	b.w(" ORDER BY created_at, event_id ").limit(int64(p.Limit))
	return b.query(), nil
}

// keysetAfter restricts a scan in (col, event_id) order to rows after (after, id); a nil
// after leaves it unrestricted.
func (b *builder) keysetAfter(col string, after any, id string) {
	switch {
	case after == nil:
	case b.d.expandKeyset:
		b.w(" AND (", col, " > ", b.arg(after), " OR (", col, " = ", b.arg(after), " AND event_id > ", b.arg(id), "))")
	default:
		b.w(" AND (", col, ", event_id) > (", b.arg(after), ", ", b.arg(id), ")")
	}
}

// existingQuery reads which of ids are rows of the table. On MySQL it is a locking
// read: it sees the newest committed rows, which a REPEATABLE READ snapshot taken
// before they committed would not. It is ordered by event_id there because MariaDB,
// even with the primary key forced, scanned the whole key of a small table for this
// read of the key's column alone, and checked the rows of open transactions on the way;
// with the order it reads ranges.
func (d *dialect) existingQuery(t tableName, ids []string) query {
	b := d.newBuilder()
	b.w("SELECT event_id FROM ", d.byID(t), " WHERE ").matchIDs(ids)
	if d.name == "mysql" {
		b.w(" ORDER BY event_id LOCK IN SHARE MODE")
	}
	return b.query()
}

// getQuery builds the lookup of [Store.Get].
func (d *dialect) getQuery(t tableName, id string) query {
	b := d.newBuilder()
	b.w("SELECT ", selectColumns, " FROM ", d.qualified(t), " WHERE event_id = ", b.arg(id))
	return b.query()
}

// deadWhere writes the WHERE clause selecting DEAD rows that match f. hinted is set
// for the queries that walk DEAD rows in created_at order, which the dead index serves.
func (b *builder) deadWhere(f outboxtype.DeadFilter, hinted bool) *builder {
	status := "status"
	if hinted {
		status = b.d.hintedStatus()
	}
	b.w(" WHERE ", status, " = 3")
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
			return query{}, fmt.Errorf("After: %w", err)
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
	return b.w("UPDATE ", table,
		" SET status = CASE WHEN order_key IS NULL THEN 0 ELSE 4 END, attempts = 0, last_error = NULL, done_at = NULL, "+
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
		qs = append(qs, b.matchIDs(chunk).w(" AND ", d.hintedStatus(), " = 3").query())
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
		b.w("UPDATE ", d.byID(t), " SET status = 6, done_at = ", b.arg(atArg), clearClaim, " WHERE ")
		qs = append(qs, b.matchIDs(chunk).w(" AND status IN (0, 2, 3, 4)").query())
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
		return nil, fmt.Errorf("Now: %w", err)
	}
	if len(p.IDs) > 0 {
		var qs []query
		for _, ids := range d.chunkIDs(p.IDs) {
			b := d.newBuilder().replaySet(d.byID(t), now).w(" WHERE ")
			b.matchIDs(ids).w(" AND ", d.hintedStatus(), " = 3")
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
	b.deadWhere(p.DeadFilter, true).w(" ORDER BY created_at, event_id ").limit(int64(p.Limit)).w(") AND ", d.hintedStatus(), " = 3")
	return []query{b.query()}, nil
}

// finishedAt is when a finished row (DONE, DEAD, FALLBACK) finished, as far as Purge is
// concerned. The migrations index this exact expression.
const finishedAt = "COALESCE(done_at, created_at)"

// purgeQuery builds one batch of [Store.Purge]. On PostgreSQL the batch's rows are
// locked with SKIP LOCKED, so that two purgers (MultiNode) never wait for each other:
// each deletes rows the other has not locked. MySQL's one DELETE … ORDER BY … LIMIT
// waits for rows another transaction holds; SQLite has one writer at a time.
func (d *dialect) purgeQuery(t tableName, p storage.PurgeParams) (query, error) {
	before, dead, upTo, err := d.purgeCutoffs(p)
	if err != nil {
		return query{}, err
	}
	b := d.newBuilder()
	if d.orderedDML {
		b.w("DELETE FROM ", d.qualified(t))
		b.purgeWhere(before, dead, upTo, p.Limit)
		return b.query(), nil
	}
	// The outer conditions repeat the subquery's: PostgreSQL does not re-run the
	// subquery on a row that a concurrent transaction changed (a replay) while the
	// DELETE waited for it, but it re-checks these on the row's new version.
	b.w("DELETE FROM ", d.qualified(t), " WHERE event_id IN (SELECT event_id FROM ", d.qualified(t))
	b.purgeWhere(before, dead, upTo, p.Limit)
	if d.skipLocked {
		b.w(" FOR UPDATE SKIP LOCKED")
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
		return nil, nil, nil, fmt.Errorf("Before: %w", err)
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
// its status's.
func (b *builder) purgeWhere(before, dead, upTo any, limit int) {
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
	b.w(" ORDER BY ", finishedAt, ", event_id ").limit(int64(limit))
}

// purgeByStatus writes, when dead is set, the condition that holds DONE rows to before
// and the others to dead; at is the finish time's expression.
func (b *builder) purgeByStatus(at string, before, dead any) {
	if dead == nil {
		return
	}
	st := b.d.hintedStatus()
	b.w(" AND (", st, " = 1 AND ", at, " < ", b.arg(before), " OR ", st, " <> 1 AND ", at, " < ", b.arg(dead), ")")
}

// statsQuery builds [StatsStore.Stats]: per status, the row count and the oldest created_at.
func (d *dialect) statsQuery(t tableName) query {
	return query{SQL: "SELECT status, COUNT(*), MIN(created_at) FROM " + d.qualified(t) + " GROUP BY status"}
}
