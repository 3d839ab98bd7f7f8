package outboxadmin

import (
	"encoding/base64"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	outbox "github.com/outboxkit/outbox/core"
)

// Query parameters.
const (
	paramEventType     = "event_type"
	paramAggregateType = "aggregate_type"
	paramListener      = "listener"
	paramLimit         = "limit"
	paramAfter         = "after"
	paramBy            = "by"
	paramStatus        = "status"
	paramAggregateID   = "aggregate_id"
	paramErrorText     = "error"
	paramFrom          = "from"
	paramTo            = "to"
	paramNewest        = "newest"
	paramBefore        = "before"
	paramOrderKey      = "order_key"
	paramBlocking      = "blocking"
)

// paramError reports a bad query parameter, path value or body field: a 400 naming it.
type paramError struct {
	param string
	msg   string
}

func (e *paramError) Error() string { return e.param + ": " + e.msg }

func badParam(param, format string, args ...any) *paramError {
	return &paramError{param: param, msg: fmt.Sprintf(format, args...)}
}

// parseQuery parses a raw query string and rejects parameters outside allowed and
// parameters given more than once, so that a misspelled or repeated filter is an
// error rather than silently ignored.
func parseQuery(raw string, allowed ...string) (url.Values, error) {
	v, err := url.ParseQuery(raw)
	if err != nil {
		return nil, badParam("query", "is not a valid query string")
	}
	for _, name := range slices.Sorted(maps.Keys(v)) { // the first bad one, deterministically
		values := v[name]
		known := false
		for _, a := range allowed {
			known = known || name == a
		}
		if !known {
			if name == "" {
				return nil, badParam("query", "has a parameter without a name")
			}
			if len(allowed) == 0 {
				return nil, badParam(printable(name), "no query parameters are accepted here")
			}
			return nil, badParam(printable(name), "unknown parameter; accepted: %s", strings.Join(allowed, ", "))
		}
		if len(values) > 1 {
			return nil, badParam(name, "is given more than once")
		}
	}
	return v, nil
}

// printable shortens an unknown parameter name for an error message; the JSON encoder
// escapes whatever it holds.
func printable(s string) string {
	const maxLen = 64
	if !utf8.ValidString(s) {
		return "(invalid UTF-8)"
	}
	if len(s) > maxLen {
		s = s[:maxLen]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		return s + "…"
	}
	return s
}

// parseFilter reads event_type, aggregate_type and listener; empty or absent means any.
// Each must be text a row can hold, as checked by [outbox.DeadFilter.Validate].
func parseFilter(v url.Values) (outbox.DeadFilter, error) {
	f := outbox.DeadFilter{EventType: v.Get(paramEventType), AggregateType: v.Get(paramAggregateType), Listener: v.Get(paramListener)}
	return f, validFilter(f)
}

// validFilter checks each field of f on its own, to name the one at fault.
func validFilter(f outbox.DeadFilter) error {
	if (outbox.DeadFilter{EventType: f.EventType}).Validate() != nil {
		return badParam(paramEventType, "must be valid UTF-8 without NUL, at most %d bytes", outbox.MaxTypeLen)
	}
	if (outbox.DeadFilter{AggregateType: f.AggregateType}).Validate() != nil {
		return badParam(paramAggregateType, "must be valid UTF-8 without NUL, at most %d bytes", outbox.MaxAggregateTypeLen)
	}
	if (outbox.DeadFilter{Listener: f.Listener}).Validate() != nil {
		return badParam(paramListener, "must be valid UTF-8 without NUL, at most %d bytes", outbox.MaxListenerLen)
	}
	return nil
}

// parseListQuery turns the query string of GET /api/dead-events into a DeadQuery with
// a limit in 1..MaxLimit. It returns a *paramError for anything it does not accept.
func parseListQuery(raw string) (outbox.DeadQuery, error) {
	v, err := parseQuery(raw, paramEventType, paramAggregateType, paramListener, paramLimit, paramAfter)
	if err != nil {
		return outbox.DeadQuery{}, err
	}
	q := outbox.DeadQuery{Limit: DefaultLimit}
	if q.DeadFilter, err = parseFilter(v); err != nil {
		return outbox.DeadQuery{}, err
	}
	if s := v.Get(paramLimit); s != "" {
		if q.Limit, err = parseLimit(s); err != nil {
			return outbox.DeadQuery{}, err
		}
	}
	if s := v.Get(paramAfter); s != "" {
		if q.After, err = decodeCursor(s); err != nil {
			return outbox.DeadQuery{}, err
		}
		if q.After.OrderSeq != 0 { // a cursor of a list by order key
			return outbox.DeadQuery{}, badParam(paramAfter, "is not a cursor returned as next by this API")
		}
	}
	return q, nil
}

// parseLimit accepts a decimal integer of at least 1; values above MaxLimit, however
// long, are clamped to MaxLimit. Signs, exponents, fractions and spaces are rejected.
func parseLimit(s string) (int, error) {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, badParam(paramLimit, "must be an integer from 1 to %d", MaxLimit)
		}
	}
	digits := strings.TrimLeft(s, "0")
	if digits == "" {
		return 0, badParam(paramLimit, "must be an integer from 1 to %d", MaxLimit)
	}
	if len(digits) > len(strconv.Itoa(MaxLimit)) {
		return MaxLimit, nil
	}
	n, err := strconv.Atoi(digits)
	if err != nil { // unreachable: at most 3 digits
		return 0, badParam(paramLimit, "must be an integer from 1 to %d", MaxLimit)
	}
	return min(n, MaxLimit), nil
}

// Groupings of GET /api/dead-events/count: the by parameter is one of them or both,
// separated by a comma ("type,listener").
const (
	byType     = "type"
	byListener = "listener"
)

// countBy is what the by parameter asks for.
type countBy struct{ types, listeners bool }

func (b countBy) any() bool { return b.types || b.listeners }

// parseCountQuery parses the query string of GET /api/dead-events/count.
func parseCountQuery(raw string) (f outbox.DeadFilter, by countBy, err error) {
	v, err := parseQuery(raw, paramEventType, paramAggregateType, paramListener, paramBy)
	if err != nil {
		return outbox.DeadFilter{}, countBy{}, err
	}
	if s := v.Get(paramBy); s != "" {
		for _, g := range strings.Split(s, ",") {
			switch {
			case g == byType && !by.types:
				by.types = true
			case g == byListener && !by.listeners:
				by.listeners = true
			default:
				return outbox.DeadFilter{}, countBy{}, badParam(paramBy, `must be "type", "listener", "type,listener" or absent`)
			}
		}
	}
	f, err = parseFilter(v)
	return f, by, err
}

// validID checks an event ID from a path before it reaches the store.
func validID(id string) error {
	if id == "" || len(id) > outbox.MaxIDLen || !utf8.ValidString(id) || strings.IndexByte(id, 0) >= 0 {
		return badParam("id", "must be 1 to %d bytes of valid UTF-8 without NUL", outbox.MaxIDLen)
	}
	return nil
}

// Cursors are opaque to clients: base64url (no padding) of "<created_at RFC 3339>|<id>",
// or "#<order_seq>|<id>" in a list by order key.
const (
	maxCursorLen = 256
	// Every dialect stores years 1000 to 9999 (MySQL's DATETIME range); a cursor
	// outside them would reach the database as an error rather than a miss.
	minCursorYear = 1000
	maxCursorYear = 9999
)

// cursorEncoding is the cursor's base64 alphabet; Strict makes every cursor have one
// encoding.
func cursorEncoding() *base64.Encoding { return base64.RawURLEncoding.Strict() }

// encodeCursor returns the after value that continues after c.
func encodeCursor(c outbox.Cursor) string {
	if c.OrderSeq != 0 {
		return cursorEncoding().EncodeToString([]byte("#" + strconv.FormatInt(c.OrderSeq, 10) + "|" + c.ID))
	}
	return cursorEncoding().EncodeToString([]byte(c.CreatedAt.UTC().Format(time.RFC3339Nano) + "|" + c.ID))
}

// decodeCursor reverses encodeCursor, rejecting anything encodeCursor cannot produce
// for a stored event.
func decodeCursor(s string) (outbox.Cursor, error) {
	bad := badParam(paramAfter, "is not a cursor returned as next by this API")
	if len(s) > maxCursorLen {
		return outbox.Cursor{}, bad
	}
	b, err := cursorEncoding().DecodeString(s)
	if err != nil {
		return outbox.Cursor{}, bad
	}
	ts, id, ok := strings.Cut(string(b), "|")
	if !ok || validID(id) != nil {
		return outbox.Cursor{}, bad
	}
	if digits, ok := strings.CutPrefix(ts, "#"); ok {
		// Only what encodeCursor writes: a positive decimal without sign or leading 0.
		seq, err := strconv.ParseInt(digits, 10, 64)
		if err != nil || seq <= 0 || strconv.FormatInt(seq, 10) != digits {
			return outbox.Cursor{}, bad
		}
		return outbox.Cursor{OrderSeq: seq, ID: id}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return outbox.Cursor{}, bad
	}
	t = t.UTC()
	if y := t.Year(); y < minCursorYear || y > maxCursorYear {
		return outbox.Cursor{}, bad
	}
	return outbox.Cursor{CreatedAt: t, ID: id}, nil
}

// parseStatus returns the status a value of the status parameter of GET /api/events
// names: new, retry, waiting, dead, done, fallback or discarded.
func parseStatus(s string) (outbox.Status, bool) {
	for _, st := range listStatuses {
		if s == strings.ToLower(st.String()) {
			return st, true
		}
	}
	return 0, false
}

// listStatuses are the statuses GET /api/events lists.
var listStatuses = [...]outbox.Status{outbox.StatusNew, outbox.StatusRetry, outbox.StatusWaiting, outbox.StatusDead,
	outbox.StatusDone, outbox.StatusFallback, outbox.StatusDiscarded}

const statusNames = "new, retry, waiting, dead, done, fallback or discarded"

// parseEventsQuery turns the query string of GET /api/events into an EventQuery with a
// limit in 1..MaxLimit. status is required; the filters, newest, limit and after are
// optional. It returns a *paramError for anything it does not accept.
func parseEventsQuery(raw string) (outbox.EventQuery, error) {
	v, err := parseQuery(raw, paramStatus, paramEventType, paramAggregateType, paramAggregateID, paramListener,
		paramErrorText, paramFrom, paramTo, paramNewest, paramLimit, paramAfter, paramOrderKey, paramBlocking)
	if err != nil {
		return outbox.EventQuery{}, err
	}
	q := outbox.EventQuery{Limit: DefaultLimit}
	st, ok := parseStatus(v.Get(paramStatus))
	if !ok {
		return outbox.EventQuery{}, badParam(paramStatus, "must be %s", statusNames)
	}
	q.Status = st
	df, err := parseFilter(v)
	if err != nil {
		return outbox.EventQuery{}, err
	}
	q.EventFilter = outbox.EventFilter{EventType: df.EventType, AggregateType: df.AggregateType, Listener: df.Listener,
		AggregateID: v.Get(paramAggregateID), ErrorContains: v.Get(paramErrorText), OrderKey: v.Get(paramOrderKey)}
	if (outbox.EventFilter{AggregateID: q.AggregateID}).Validate() != nil {
		return outbox.EventQuery{}, badParam(paramAggregateID, "must be valid UTF-8 without NUL, at most %d bytes", outbox.MaxAggregateIDLen)
	}
	if (outbox.EventFilter{ErrorContains: q.ErrorContains}).Validate() != nil {
		return outbox.EventQuery{}, badParam(paramErrorText, "must be valid UTF-8 without NUL, at most %d bytes", outbox.MaxErrorSearchLen)
	}
	if q.From, err = parseTime(paramFrom, v.Get(paramFrom)); err != nil {
		return outbox.EventQuery{}, err
	}
	if q.To, err = parseTime(paramTo, v.Get(paramTo)); err != nil {
		return outbox.EventQuery{}, err
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To) {
		return outbox.EventQuery{}, badParam(paramTo, "must be later than from")
	}
	if q.OrderKey != "" {
		switch {
		case (outbox.EventFilter{OrderKey: q.OrderKey}).Validate() != nil:
			return outbox.EventQuery{}, badParam(paramOrderKey, "must be valid UTF-8 without NUL, at most %d bytes", outbox.MaxOrderKeyLen)
		case st != outbox.StatusNew && st != outbox.StatusRetry && st != outbox.StatusWaiting && st != outbox.StatusDead:
			return outbox.EventQuery{}, badParam(paramOrderKey, "lists new, retry, waiting and dead events: the others have left their key")
		case q.AggregateID != "" || !q.From.IsZero() || !q.To.IsZero():
			return outbox.EventQuery{}, badParam(paramOrderKey, "does not go with aggregate_id, from or to: a key's list is in the key's order")
		}
	}
	if q.Newest, err = parseBool(paramNewest, v.Get(paramNewest)); err != nil {
		return outbox.EventQuery{}, err
	}
	if q.Blocking, err = parseBool(paramBlocking, v.Get(paramBlocking)); err != nil {
		return outbox.EventQuery{}, err
	}
	if q.Blocking && st != outbox.StatusRetry && st != outbox.StatusDead {
		return outbox.EventQuery{}, badParam(paramBlocking, "lists retry and dead events: only those hold their order key")
	}
	if s := v.Get(paramLimit); s != "" {
		if q.Limit, err = parseLimit(s); err != nil {
			return outbox.EventQuery{}, err
		}
	}
	if s := v.Get(paramAfter); s != "" {
		if q.After, err = decodeCursor(s); err != nil {
			return outbox.EventQuery{}, err
		}
		if (q.After.OrderSeq != 0) != (q.OrderKey != "") { // a cursor of another kind of list
			return outbox.EventQuery{}, badParam(paramAfter, "is not a cursor returned as next by this API")
		}
	}
	return q, nil
}

// parseBool reads a flag parameter: 1 or true, 0, false or absent.
func parseBool(param, s string) (bool, error) {
	switch s {
	case "", "0", "false":
		return false, nil
	case "1", "true":
		return true, nil
	}
	return false, badParam(param, "must be 1, true, 0, false or absent")
}

// parseTime parses an RFC 3339 time ("2026-05-01T12:00:00Z", fractional seconds and an
// offset allowed) in the years every database stores; "" is the zero time.
func parseTime(param, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, badParam(param, "must be an RFC 3339 time such as 2026-05-01T12:00:00Z")
	}
	t = t.UTC()
	if y := t.Year(); y < minCursorYear || y > maxCursorYear {
		return time.Time{}, badParam(param, "must be in the years %d to %d", minCursorYear, maxCursorYear)
	}
	return t, nil
}

// parseAuditQuery parses the query string of GET /api/audit: limit and before (the next
// of the previous page).
func parseAuditQuery(raw string) (outbox.AuditQuery, error) {
	v, err := parseQuery(raw, paramLimit, paramBefore)
	if err != nil {
		return outbox.AuditQuery{}, err
	}
	q := outbox.AuditQuery{Limit: DefaultLimit, Before: v.Get(paramBefore)}
	if s := v.Get(paramLimit); s != "" {
		if q.Limit, err = parseLimit(s); err != nil {
			return outbox.AuditQuery{}, err
		}
	}
	if q.Before != "" && validID(q.Before) != nil {
		return outbox.AuditQuery{}, badParam(paramBefore, "is not a next value returned by this API")
	}
	return q, nil
}

// checkIDs validates the IDs of a bulk request and returns them without repeats, in
// their first order.
func checkIDs(ids []string) ([]string, error) {
	if len(ids) == 0 || len(ids) > outbox.MaxBulkIDs {
		return nil, badParam("ids", "must hold 1 to %d event IDs", outbox.MaxBulkIDs)
	}
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if validID(id) != nil {
			return nil, badParam("ids", "each must be 1 to %d bytes of valid UTF-8 without NUL", outbox.MaxIDLen)
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out, nil
}
