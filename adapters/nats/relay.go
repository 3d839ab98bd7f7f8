package outboxnats

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	outbox "github.com/outboxkit/outbox/core"
)

// The headers the relay adds to each message ([Relay.Handle]); those marked "when set"
// only when the event's field is not empty. The Kafka relay uses the same names.
const (
	HeaderEventID       = "outbox-event-id"       // Event.ID
	HeaderEventType     = "outbox-event-type"     // Event.Type
	HeaderAggregateType = "outbox-aggregate-type" // Event.AggregateType
	HeaderAggregateID   = "outbox-aggregate-id"   // Event.AggregateID, when set
	HeaderTenantID      = "outbox-tenant-id"      // Event.TenantID, when set
	HeaderOrderKey      = "outbox-order-key"      // Event.OrderKey, when set
	HeaderCreatedAt     = "outbox-created-at"     // Event.CreatedAt, RFC 3339 with nanoseconds, UTC
)

// Errors that no retry can fix. Handle returns them wrapped together with
// outbox.ErrUnrecoverable, so the event goes DEAD after one attempt.
var (
	// ErrInvalidSubject is a subject from Config.Subject that is empty, holds white
	// space, control characters or an empty token, or has a wildcard token.
	ErrInvalidSubject = errors.New("invalid subject")
	// ErrInvalidHeader is a header name that NATS cannot carry, from the event's own
	// headers or from Config.Propagate.
	ErrInvalidHeader = errors.New("invalid header")
	// ErrMessageTooLarge is a message over the server's max_payload (checked by nats.go
	// before sending, and by JetStream), over the stream's max_msg_size, or with headers
	// over 64 KiB.
	ErrMessageTooLarge = errors.New("message too large")
)

// Relay publishes outbox events to NATS JetStream: it is an [outbox.Listener] to
// register for the routes to publish (see the package documentation). Create it with
// [New]. It is safe for concurrent use and holds no resources of its own: close the
// NATS connection after stopping the outbox.
type Relay struct {
	js        jetstream.JetStream
	subject   func(e *outbox.Event) string
	propagate func(ctx context.Context, set func(key, value string))
}

var _ outbox.BatchListener = (*Relay)(nil)

// New returns a Relay that publishes with js. It returns an [*outbox.ConfigError]
// (matching outbox.ErrInvalidConfig) when js is nil.
func New(js jetstream.JetStream, cfg Config) (*Relay, error) {
	if js == nil {
		return nil, &outbox.ConfigError{Field: "outboxnats.New js", Reason: "is nil; pass jetstream.New(nc)"}
	}
	subject := cfg.Subject
	if subject == nil {
		subject = DefaultSubject
	}
	return &Relay{js: js, subject: subject, propagate: cfg.Propagate}, nil
}

// Handle publishes e to JetStream and returns nil once the stream has stored it: after
// JetStream's PubAck, also when the PubAck reports a duplicate (an earlier attempt's
// message is in the stream). ctx, which ends at the outbox's listener timeout, bounds
// the publish (a ctx without a deadline gets nats.go's default of 5 seconds).
//
// The message carries e.Payload as data and these headers, a later one replacing an
// earlier one of the same (case-sensitive) name: the event's own Headers; the outbox-*
// headers (see [HeaderEventID]); those Config.Propagate sets; and Nats-Msg-Id, always
// e.ID, so that the stream's duplicate window drops the copies the outbox's
// redeliveries publish. nats.go replaces CR and LF in header values with spaces and
// trims surrounding white space.
//
// Errors are returned for the outbox to retry them: a timeout, a lost connection, no
// stream bound to the subject (jetstream.ErrNoStreamResponse: a stream may be created
// later), a full stream that discards new messages, and every other error of the
// server. Three are permanent and wrap outbox.ErrUnrecoverable as well, so the event
// goes DEAD at once: [ErrInvalidSubject], [ErrInvalidHeader] and [ErrMessageTooLarge].
func (r *Relay) Handle(ctx context.Context, e *outbox.Event) error {
	subject := r.subject(e)
	if err := checkSubject(subject); err != nil {
		return unrecoverable(fmt.Errorf("outboxnats: event %s: %w", e.ID, err))
	}
	msg := &nats.Msg{Subject: subject, Data: e.Payload, Header: r.header(ctx, e)}
	for key := range msg.Header {
		if err := checkHeaderKey(key); err != nil {
			return unrecoverable(fmt.Errorf("outboxnats: event %s: %w", e.ID, err))
		}
	}
	if _, err := r.js.PublishMsg(ctx, msg); err != nil {
		if reason := permanentReason(err); reason != nil {
			return unrecoverable(fmt.Errorf("outboxnats: publish event %s to %s: %w: %w", e.ID, subject, reason, err))
		}
		return fmt.Errorf("outboxnats: publish event %s to %s: %w", e.ID, subject, err)
	}
	return nil
}

// HandleBatch publishes the batch's events at once, each as Handle does with its
// item's context (its span, and its own deadline, which ends no later than ctx's), and
// returns each event's error once all are answered: the publishes share the connection's buffered writer, so the
// messages go out together and their PubAcks come back pipelined, one round trip for
// the batch instead of one per event. The outbox calls it for the events of one
// subscription queued together, up to [outbox.Subscription.BatchSize].
func (r *Relay) HandleBatch(_ context.Context, batch []outbox.BatchItem) []error {
	errs := make([]error, len(batch))
	if len(batch) == 1 {
		errs[0] = r.Handle(batch[0].Ctx, batch[0].Event)
		return errs
	}
	var wg sync.WaitGroup
	for i, it := range batch {
		wg.Go(func() { errs[i] = r.Handle(it.Ctx, it.Event) })
	}
	wg.Wait()
	return errs
}

// header builds the message's headers in the order Handle documents.
func (r *Relay) header(ctx context.Context, e *outbox.Event) nats.Header {
	h := make(nats.Header, len(e.Headers)+9)
	for k, v := range e.Headers {
		h.Set(k, v)
	}
	h.Set(HeaderEventID, e.ID)
	h.Set(HeaderEventType, e.Type)
	h.Set(HeaderAggregateType, e.AggregateType)
	setIf(h, HeaderAggregateID, e.AggregateID)
	setIf(h, HeaderTenantID, e.TenantID)
	setIf(h, HeaderOrderKey, e.OrderKey)
	h.Set(HeaderCreatedAt, e.CreatedAt.UTC().Format(time.RFC3339Nano))
	if r.propagate != nil {
		r.propagate(ctx, h.Set)
	}
	h.Set(jetstream.MsgIDHeader, e.ID)
	return h
}

func setIf(h nats.Header, key, value string) {
	if value != "" {
		h.Set(key, value)
	}
}

// permanentReason returns the reason why err, from PublishMsg, is permanent, or nil
// when a retry may succeed. The message is too large when nats.go's check against the
// server's max_payload fails, or JetStream's against max_payload, the stream's
// max_msg_size or its 64 KiB header limit. nats.go's invalid header and subject errors
// cannot happen after Handle's own checks; they are mapped for safety.
func permanentReason(err error) error {
	switch {
	case errors.Is(err, nats.ErrMaxPayload):
		return ErrMessageTooLarge
	case errors.Is(err, nats.ErrBadHeaderMsg):
		return ErrInvalidHeader
	case errors.Is(err, nats.ErrBadSubject):
		return ErrInvalidSubject
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case errCodeMessageExceedsMaximum, errCodeHeaderExceedsMaximum:
			return ErrMessageTooLarge
		}
	}
	return nil
}

// JetStream API error codes that nats.go has no constant for (nats-server's
// JSStreamMessageExceedsMaximumErr and JSStreamHeaderExceedsMaximumErr).
const (
	errCodeMessageExceedsMaximum jetstream.ErrorCode = 10054
	errCodeHeaderExceedsMaximum  jetstream.ErrorCode = 10097
)

// unrecoverableError marks an error that no retry can fix: it matches
// outbox.ErrUnrecoverable and err, and reads as err followed by " (permanent)".
type unrecoverableError struct{ err error }

func unrecoverable(err error) error { return &unrecoverableError{err: err} }

func (e *unrecoverableError) Error() string { return e.err.Error() + " (permanent)" }

func (e *unrecoverableError) Unwrap() []error { return []error{outbox.ErrUnrecoverable, e.err} }
