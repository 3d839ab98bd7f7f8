package outboxnats

import (
	"context"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	outbox "github.com/outboxkit/outbox/core"
)

// DefaultSubjectPrefix is the first token of [DefaultSubject]'s subjects.
const DefaultSubjectPrefix = "outbox"

// Config configures a [Relay]. The zero value is ready to use.
type Config struct {
	// Subject returns the subject an event is published on. An empty or invalid subject
	// (see [ErrInvalidSubject]) is a permanent error: the event goes DEAD at once. It
	// must be safe for concurrent use. Defaults to [DefaultSubject].
	Subject func(e *outbox.Event) string

	// Propagate, when set, is called last, right before each publish, with the
	// listener's context and a function that sets one header of the message, so that
	// trace context (W3C traceparent and tracestate, say) travels with it. A key it
	// sets replaces an event header or an outbox-* header of the same key; it cannot
	// change Nats-Msg-Id. The outboxotel module provides a function of this type.
	// Defaults to none.
	Propagate func(ctx context.Context, set func(key, value string))
}

// DefaultSubject is the default [Config.Subject]: "outbox.<aggregate type>.<event type>",
// for example "outbox.Order.OrderPlaced" ("outbox.__GLOBAL__.UserSignedUp" for an event
// written without an aggregate type). Every character that cannot stand in a subject
// token, '.', '*', '>', white space and control characters, becomes '_', so each name
// stays one token: aggregate type "billing.Invoice" gives "outbox.billing_Invoice.…".
// Stream subjects such as "outbox.>" or "outbox.Order.*" select them.
func DefaultSubject(e *outbox.Event) string {
	aggregateType := e.AggregateType
	if aggregateType == "" {
		aggregateType = outbox.GlobalAggregateType
	}
	return DefaultSubjectPrefix + "." + subjectToken(aggregateType) + "." + subjectToken(e.Type)
}

// subjectToken returns s with every character that cannot stand in a subject token
// replaced by '_'.
func subjectToken(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '.' || r == '*' || r == '>' || unicode.IsSpace(r) || unicode.IsControl(r) {
			return '_'
		}
		return r
	}, s)
}

// checkSubject returns nil when subject is one a message can be published on: UTF-8
// text without white space or control characters, made of non-empty tokens separated
// by '.', none of them a wildcard ("*" or ">").
func checkSubject(subject string) error {
	if subject == "" {
		return fmt.Errorf("%w: empty", ErrInvalidSubject)
	}
	if !utf8.ValidString(subject) {
		return fmt.Errorf("%w %q: not valid UTF-8", ErrInvalidSubject, subject)
	}
	if i := strings.IndexFunc(subject, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }); i >= 0 {
		return fmt.Errorf("%w %q: white space or control character at byte %d", ErrInvalidSubject, subject, i)
	}
	for token := range strings.SplitSeq(subject, ".") {
		switch token {
		case "":
			return fmt.Errorf("%w %q: empty token", ErrInvalidSubject, subject)
		case "*", ">":
			return fmt.Errorf("%w %q: wildcard token %q", ErrInvalidSubject, subject, token)
		}
	}
	return nil
}

// checkHeaderKey returns nil when nats.go can encode key as a header name: printable
// ASCII (33 to 126) except the separators "()/,:;<=>?@[\]{} (nats.go's rule, stricter
// than ADR-4's).
func checkHeaderKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidHeader)
	}
	for i := range len(key) {
		c := key[i]
		if c < 33 || c > 126 || strings.IndexByte(`"()/,:;<=>?@[\]{}`, c) >= 0 {
			return fmt.Errorf("%w %q: character %q is not allowed in a NATS header name", ErrInvalidHeader, key, c)
		}
	}
	return nil
}
