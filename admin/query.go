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

// Cursors are opaque to clients: base64url (no padding) of "<created_at RFC 3339>|<id>".
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
