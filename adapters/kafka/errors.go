package outboxkafka

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	outbox "github.com/outboxkit/outbox/core"
)

// Reasons [Relay.Handle] refuses an event before producing it. Both are permanent.
var (
	// ErrEmptyTopic is the reason for an event whose [Config.Topic] is empty.
	ErrEmptyTopic = errors.New("outboxkafka: empty topic")
	// ErrNoPayload is the reason for an event without a payload: Kafka would take a
	// record without a value for a tombstone, which deletes its key from a compacted
	// topic.
	ErrNoPayload = errors.New("outboxkafka: event has no payload")
)

// ProduceError reports an event that [Relay.Handle] did not get into Kafka. Err is the
// cause: franz-go's error (often a *kerr.Error such as kerr.MessageTooLarge), the
// context's cause when the listener's context ended before the broker acknowledged the
// record, or [ErrEmptyTopic] or [ErrNoPayload]. Find it with errors.As.
type ProduceError struct {
	EventID string // the event's ID
	Topic   string // the topic Config.Topic chose; "" when it chose none
	// Permanent reports that no retry can fix the failure; the error then matches
	// [outbox.ErrUnrecoverable], and the outbox moves the event to DEAD at once.
	Permanent bool
	Err       error
}

// Error implements error.
func (e *ProduceError) Error() string {
	kind := ""
	if e.Permanent {
		kind = " (permanent)"
	}
	return fmt.Sprintf("outboxkafka: produce event %s to topic %q%s: %v", e.EventID, e.Topic, kind, e.Err)
}

// Unwrap returns Err, and [outbox.ErrUnrecoverable] too when the error is permanent.
func (e *ProduceError) Unwrap() []error {
	if e.Permanent {
		return []error{e.Err, outbox.ErrUnrecoverable}
	}
	return []error{e.Err}
}

// permanentErrs are the broker errors that producing the same record again cannot fix:
// the record is too large, the broker refused its content (a compacted topic takes no
// record without a key), or the topic's name is invalid.
var permanentErrs = []error{
	kerr.MessageTooLarge,
	kerr.RecordListTooLarge,
	kerr.InvalidRecord,
	kerr.InvalidTopicException,
}

// permanent reports whether err, from a produce, is one of permanentErrs.
func permanent(err error) bool {
	for _, p := range permanentErrs {
		if errors.Is(err, p) {
			return true
		}
	}
	return false
}
