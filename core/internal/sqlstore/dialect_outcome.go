package sqlstore

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// The outcome statements: DONE (MarkDone, FanOut), the released claims, RETRY and
// deferrals (Reschedule), DEAD and FALLBACK (MarkDead), each fenced so that a row changes
// only while it is not finished and, in MultiNode mode, still claimed by the token.

// clearClaim is appended to every status change: a row that changes state is no longer
// claimed by a poller.
const clearClaim = ", locked_by = NULL, locked_until = NULL"

// fence writes the WHERE conditions every outcome update shares: the row is not DONE
// (nor WAITING behind an earlier event of its key) and, when token is set, still
// claimed by it.
func (b *builder) fence(token string) *builder {
	b.w(" AND status IN (", sqlStatuses(outboxtype.StatusNew, outboxtype.StatusRetry, outboxtype.StatusDead), ")")
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
	b.w("UPDATE ", b.d.byID(t), " SET status = ", sqlStatus(outboxtype.StatusDone), ", done_at = ", b.arg(doneAt), clearClaim, " WHERE ")
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
		b.matchIDTokens(t, ids[start:end], tokens[start:end]).w(" AND status IN (", pendingStatuses(), ")")
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
	status := outboxtype.StatusDead
	if p.Fallback {
		status = outboxtype.StatusFallback
	}
	b.w("UPDATE ", d.qualified(t), " SET status = ", sqlStatus(status), ", done_at = ", b.arg(deadAt), ", last_error = ", b.arg(nullString(truncateLastError(p.Reason))))
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
