package outbox

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// encodeEnvelopes validates envs and turns them into events ready to insert. now is the
// write time; maxPayload the payload limit in bytes. Every error is an *EnvelopeError.
func encodeEnvelopes(envs []Envelope, now time.Time, maxPayload int) ([]Event, error) {
	events := make([]Event, len(envs))
	var seen map[string]int
	if len(envs) > 1 {
		seen = make(map[string]int, len(envs))
	}
	now = canonicalTime(now)
	for i := range envs {
		if err := encodeEnvelope(&envs[i], &events[i], now, maxPayload); err != nil {
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

func encodeEnvelope(env *Envelope, ev *Event, now time.Time, maxPayload int) *EnvelopeError {
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
	} {
		if len(f.value) > f.limit {
			return &EnvelopeError{Field: f.name, Err: ErrFieldTooLong, Detail: fmt.Sprintf("%d bytes, limit %d", len(f.value), f.limit)}
		}
		if !validText(f.value) {
			return &EnvelopeError{Field: f.name, Err: ErrInvalidText}
		}
	}
	var headers map[string]string
	if len(env.Headers) > 0 {
		headers = make(map[string]string, len(env.Headers))
		for k, v := range env.Headers {
			if k == "" {
				return &EnvelopeError{Field: "Headers", Err: ErrEmptyHeaderKey}
			}
			if !validText(k) || !validText(v) {
				return &EnvelopeError{Field: "Headers", Err: ErrInvalidText, Detail: fmt.Sprintf("key %q", k)}
			}
			headers[k] = v
		}
	}
	payload, perr := encodePayload(env.Payload, maxPayload)
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
	}
	return nil
}

// encodePayload turns the envelope payload into JSON text exactly once.
func encodePayload(p any, limit int) (json.RawMessage, *EnvelopeError) {
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
	if hasEscapedNUL(raw) {
		return nil, &EnvelopeError{Field: "Payload", Err: ErrInvalidPayload, Detail: `contains \u0000, which PostgreSQL cannot store`}
	}
	if owned {
		return raw, nil
	}
	// Copy so a caller reusing its buffer cannot change what is queued for dispatch.
	return append(json.RawMessage(nil), raw...), nil
}

// canonicalTime is the one time representation every store uses: UTC, microseconds.
func canonicalTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// validText reports whether s can be stored in a text column of every supported
// database: valid UTF-8 (JSON encoding would silently replace invalid bytes) and no NUL
// (PostgreSQL rejects it).
func validText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// hasEscapedNUL reports whether valid JSON text contains the escape \u0000 (an escaped
// backslash followed by "u0000" does not count).
func hasEscapedNUL(b []byte) bool {
	for i := 0; i+6 <= len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if string(b[i+1:i+6]) == "u0000" {
			return true
		}
		i++ // skip the escaped character, so "\\\\u0000" is not taken for an escape
	}
	return false
}
