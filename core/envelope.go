package outbox

import (
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/outboxkit/outbox/core/internal/check"
)

// encodeEnvelopes validates envs and turns them into events ready to insert. now is the
// write time; maxPayload the payload limit in bytes; newIDs that no envelope has an ID
// (generatesIDs), so none can be used twice. Every error is an *EnvelopeError.
func encodeEnvelopes(envs []Envelope, now time.Time, maxPayload int, codec Codec, newIDs bool) ([]Event, error) {
	events := make([]Event, len(envs))
	var seen map[string]int
	if len(envs) > 1 && !newIDs { // generated IDs are unique
		seen = make(map[string]int, len(envs))
	}
	now = canonicalTime(now)
	for i := range envs {
		if err := encodeEnvelope(&envs[i], &events[i], now, maxPayload, codec); err != nil {
			err.Index = i
			return nil, err
		}
		if seen != nil {
			if j, dup := seen[events[i].ID]; dup {
				return nil, &EnvelopeError{Index: i, Field: "ID", Err: ErrDuplicateID, Detail: fmt.Sprintf("same as envelope %d", j)}
			}
			seen[events[i].ID] = i
		}
	}
	return events, nil
}

// generatesIDs reports whether every envelope leaves its ID to the writer (NewID).
func generatesIDs(envs []Envelope) bool {
	for i := range envs {
		if envs[i].ID != "" {
			return false
		}
	}
	return true
}

func encodeEnvelope(env *Envelope, ev *Event, now time.Time, maxPayload int, codec Codec) *EnvelopeError {
	if env.Type == "" {
		return &EnvelopeError{Field: "Type", Err: ErrEmptyType}
	}
	for _, f := range [...]struct {
		name, value string
		limit       int
	}{
		{"ID", env.ID, MaxIDLen},
		{"Type", env.Type, MaxTypeLen},
		{"AggregateType", env.AggregateType, MaxAggregateTypeLen},
		{"AggregateID", env.AggregateID, MaxAggregateIDLen},
		{"TenantID", env.TenantID, MaxTenantIDLen},
		{"OrderKey", env.OrderKey, MaxOrderKeyLen},
	} {
		if len(f.value) > f.limit {
			return &EnvelopeError{Field: f.name, Err: ErrFieldTooLong, Detail: fmt.Sprintf("%d bytes, limit %d", len(f.value), f.limit)}
		}
		if !check.ValidText(f.value) {
			return &EnvelopeError{Field: f.name, Err: ErrInvalidText}
		}
	}
	var headers map[string]string
	if len(env.Headers) > 0 {
		headers = make(map[string]string, len(env.Headers))
		size := 0
		for k, v := range env.Headers {
			if k == "" {
				return &EnvelopeError{Field: "Headers", Err: ErrEmptyHeaderKey}
			}
			if size += len(k) + len(v); size > MaxHeadersBytes {
				return &EnvelopeError{Field: "Headers", Err: ErrHeadersTooLarge, Detail: fmt.Sprintf("more than %d bytes of keys and values", MaxHeadersBytes)}
			}
			if !check.ValidText(k) || !check.ValidText(v) {
				return &EnvelopeError{Field: "Headers", Err: ErrInvalidText, Detail: fmt.Sprintf("key %q", cut(k, 64))}
			}
			headers[k] = v
		}
	}
	payload, perr := encodePayload(env.Payload, maxPayload, codec)
	if perr != nil {
		return perr
	}

	occurred := now
	if !env.OccurredAt.IsZero() {
		occurred = canonicalTime(env.OccurredAt)
	}
	available := occurred
	switch {
	case !env.AvailableAt.IsZero() && env.DeliverAfter != 0:
		return &EnvelopeError{Field: "AvailableAt", Err: ErrInvalidDelay, Detail: "AvailableAt and DeliverAfter are mutually exclusive"}
	case env.DeliverAfter < 0:
		return &EnvelopeError{Field: "DeliverAfter", Err: ErrInvalidDelay, Detail: "negative"}
	case env.DeliverAfter > 0:
		available = canonicalTime(occurred.Add(env.DeliverAfter))
	case !env.AvailableAt.IsZero():
		available = canonicalTime(env.AvailableAt)
		if available.Before(occurred) {
			return &EnvelopeError{Field: "AvailableAt", Err: ErrInvalidDelay, Detail: "before OccurredAt"}
		}
	}
	// Due from the write at the earliest, whatever OccurredAt says: the poller's
	// low-water mark reads a row from its due time (core/internal/poll/lowwater.go).
	if available.Before(now) {
		available = now
	}

	// The narrowest range of the supported databases (MySQL's DATETIME), so that an
	// envelope is accepted or rejected the same way on all of them, before any SQL.
	if !storableTime(occurred) {
		return &EnvelopeError{Field: "OccurredAt", Err: ErrInvalidTime, Detail: occurred.Format(time.RFC3339)}
	}
	if !storableTime(available) {
		field := "AvailableAt"
		if env.DeliverAfter != 0 {
			field = "DeliverAfter"
		}
		return &EnvelopeError{Field: field, Err: ErrInvalidTime, Detail: available.Format(time.RFC3339)}
	}

	id := env.ID
	if id == "" {
		id = NewID()
	}
	aggType := env.AggregateType
	if aggType == "" {
		aggType = GlobalAggregateType
	}
	*ev = Event{
		ID:            id,
		Type:          env.Type,
		AggregateType: aggType,
		AggregateID:   env.AggregateID,
		TenantID:      env.TenantID,
		Payload:       payload,
		Headers:       headers,
		Status:        StatusNew,
		CreatedAt:     occurred,
		AvailableAt:   available,
		OrderKey:      env.OrderKey,
	}
	return nil
}

// encodePayload turns the envelope payload into JSON text exactly once, with codec
// (nil: encoding/json) unless it is JSON text already.
func encodePayload(p any, limit int, codec Codec) (json.RawMessage, *EnvelopeError) {
	var raw []byte
	owned := false // raw was marshalled here: valid, and nobody else holds it
	switch v := p.(type) {
	case nil:
		return nil, &EnvelopeError{Field: "Payload", Err: ErrPayloadRequired}
	case json.RawMessage:
		if v == nil {
			return nil, &EnvelopeError{Field: "Payload", Err: ErrPayloadRequired}
		}
		raw = v
	case []byte:
		if v == nil {
			return nil, &EnvelopeError{Field: "Payload", Err: ErrPayloadRequired}
		}
		raw = v
	default:
		if _, std := codec.(JSONCodec); codec != nil && !std {
			b, err := codec.Marshal(v)
			if err != nil {
				return nil, &EnvelopeError{Field: "Payload", Err: ErrInvalidPayload, Detail: err.Error()}
			}
			raw = b // checked as JSON below, and copied
			break
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, &EnvelopeError{Field: "Payload", Err: ErrInvalidPayload, Detail: err.Error()}
		}
		raw, owned = b, true
	}
	if len(raw) > limit {
		return nil, &EnvelopeError{Field: "Payload", Err: ErrPayloadTooLarge, Detail: fmt.Sprintf("%d bytes, limit %d", len(raw), limit)}
	}
	if !owned && !json.Valid(raw) {
		return nil, &EnvelopeError{Field: "Payload", Err: ErrInvalidPayload}
	}
	// Marshalled payloads are scanned too: a json.RawMessage or Marshaler inside a Go
	// value reaches the output without any UTF-8 or escape check.
	why, growth := payloadProblem(raw)
	if why != "" {
		return nil, &EnvelopeError{Field: "Payload", Err: ErrInvalidPayload, Detail: why}
	}
	// PostgreSQL returns numbers written out in full: a payload of a few kilobytes of
	// 1e131071 would be read back as gigabytes, and every read of its row would fail.
	if n := len(raw) + growth; n > limit {
		return nil, &EnvelopeError{Field: "Payload", Err: ErrPayloadTooLarge, Detail: fmt.Sprintf(
			"%d bytes with its numbers written out in full (no exponent), as PostgreSQL returns them, limit %d", n, limit)}
	}
	if owned {
		return raw, nil
	}
	// Copy so a caller reusing its buffer cannot change what is queued for dispatch.
	return append(json.RawMessage(nil), raw...), nil
}

// storableTime reports whether t (UTC) lies in the years 1000 to 9999, which every
// supported database stores: MySQL's DATETIME holds no other.
func storableTime(t time.Time) bool { y := t.Year(); return y >= 1000 && y <= 9999 }

// canonicalTime is the one time representation every store uses: UTC, microseconds.
func canonicalTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// Limits of what every supported database stores as a JSON payload, beyond valid JSON.
const (
	// maxPayloadDepth is the deepest nesting of arrays and objects: MariaDB's
	// JSON_VALID, the CHECK constraint of its JSON columns, rejects 32 levels.
	maxPayloadDepth = 31
	// PostgreSQL's numeric, which jsonb stores numbers as, holds at most 131072 digits
	// before the decimal point and 16383 after it.
	pgNumericIntDigits  = 131072
	pgNumericFracDigits = 16383
)

// payloadProblem reports why the valid JSON text b cannot be stored by every supported
// database, or "" when it can: invalid UTF-8, \u0000 or an unpaired surrogate escape in
// a string (PostgreSQL's jsonb rejects them, MariaDB's JSON_VALID the last two), nesting
// deeper than maxPayloadDepth (MariaDB), or a number outside PostgreSQL's numeric range.
// It also returns by how many bytes the payload's numbers grow when written out in full
// with no exponent, as PostgreSQL's jsonb stores and returns them (1e1000 is returned as
// 1001 digits). It reads b once, and allocates only for the reason.
func payloadProblem(b []byte) (why string, growth int) {
	depth := 0
	for i := 0; i < len(b); {
		switch c := b[i]; {
		case c == '"':
			if i, why = scanJSONString(b, i+1); why != "" {
				return why, growth
			}
		case c == '[' || c == '{':
			if depth++; depth > maxPayloadDepth {
				return fmt.Sprintf("nested deeper than %d levels, which MariaDB rejects", maxPayloadDepth), growth
			}
			i++
		case c == ']' || c == '}':
			depth--
			i++
		case c == '-' || c >= '0' && c <= '9':
			var grow int
			if i, grow, why = scanJSONNumber(b, i); why != "" {
				return why, growth
			}
			growth += grow
		default:
			i++
		}
	}
	return "", growth
}

// scanJSONString checks the string whose text starts at b[i] (after the opening quote)
// and returns the index after its closing quote.
func scanJSONString(b []byte, i int) (int, string) {
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, ""
		case c == '\\':
			if i+1 < len(b) && b[i+1] != 'u' {
				i += 2
				continue
			}
			r := hex4(b, i+2)
			switch {
			case r == 0:
				return i, `contains \u0000, which PostgreSQL cannot store`
			case r >= 0xD800 && r < 0xDC00: // a high surrogate: a low one must follow
				if i+7 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
					if lo := hex4(b, i+8); lo >= 0xDC00 && lo < 0xE000 {
						i += 12
						continue
					}
				}
				return i, fmt.Sprintf(`unpaired surrogate escape \u%04x, which PostgreSQL and MariaDB reject`, r)
			case r >= 0xDC00 && r < 0xE000: // a low surrogate without a high one
				return i, fmt.Sprintf(`unpaired surrogate escape \u%04x, which PostgreSQL and MariaDB reject`, r)
			case r < 0: // not valid JSON, which the caller has ruled out
				return i, "malformed escape"
			}
			i += 6
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return i, fmt.Sprintf("invalid UTF-8 at byte %d", i)
			}
			i += size
		}
	}
	return i, ""
}

// hex4 decodes the four hex digits of a \u escape at b[i:i+4], or returns -1.
func hex4(b []byte, i int) rune {
	if i+4 > len(b) {
		return -1
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// scanJSONNumber checks the number that starts at b[i] against PostgreSQL's numeric
// range and returns the index after it, and by how many bytes the number grows when
// PostgreSQL writes it out (numeric has no exponent form: 1e5 is returned as 100000 and
// 1e-5 as 0.00001). The range check is conservative: it counts the digits as written,
// so it rejects, for example, 0.01e131073 (1e131071) too.
func scanJSONNumber(b []byte, i int) (next, growth int, why string) {
	start := i
	if b[i] == '-' {
		i++
	}
	digits := func() int {
		j := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i - j
	}
	intDigits, fracDigits, exp := digits(), 0, 0
	if i < len(b) && b[i] == '.' {
		i++
		fracDigits = digits()
	}
	hasExp := false
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		hasExp = true
		i++
		neg := i < len(b) && b[i] == '-'
		if i < len(b) && (b[i] == '-' || b[i] == '+') {
			i++
		}
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			if exp < 1e8 { // past the limits anyway; stop before overflowing
				exp = exp*10 + int(b[i]-'0')
			}
		}
		if neg {
			exp = -exp
		}
	}
	if intDigits+exp > pgNumericIntDigits || fracDigits-exp > pgNumericFracDigits {
		n := b[start:i]
		if len(n) > 24 {
			n = append(n[:21:21], "..."...)
		}
		return i, 0, fmt.Sprintf("number %s is outside PostgreSQL's numeric range", n)
	}
	if hasExp {
		// Written out: the sign, the integer digits (at least "0"), and the point with
		// the fraction's digits when the scale is positive. An upper bound: leading
		// zeros would be dropped.
		n := max(intDigits+exp, 1)
		if scale := fracDigits - exp; scale > 0 {
			n += 1 + scale
		}
		if b[start] == '-' {
			n++
		}
		growth = max(n-(i-start), 0)
	}
	return i, growth, ""
}
