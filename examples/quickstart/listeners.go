package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	outboxprom "github.com/outboxkit/outbox/adapters/prometheus"
	outbox "github.com/outboxkit/outbox/core"
	outboxfx "github.com/outboxkit/outbox/fxmodule"
)

// newOutboxConfig configures the outbox for a demo you can watch: a failing event waits
// about 0.5 s, then 1 s (with jitter), and the poller's next cycle, before its next
// attempt, and is DEAD after its third failure. The defaults are 10 attempts, with delays
// from 0.2 s doubling up to 60 s.
func newOutboxConfig(metrics *outboxprom.Metrics) outboxfx.Config {
	return outboxfx.Config{
		Dialect:     outbox.SQLite,
		MaxAttempts: 3,
		Retry:       outbox.ExponentialBackoff{Base: 500 * time.Millisecond, Max: 2 * time.Second},
		// The poller delivers retries, and any event the hot path missed, every
		// PollInterval; the default, 5 s, would make the retries slow to watch.
		PollInterval: time.Second,
		Metrics:      metrics,
	}
}

// publisher stands for a message broker client: in a real service, Handle would publish
// the event to Kafka, NATS or a webhook. Delivery is at least once, so consumers
// deduplicate by event ID.
type publisher struct{ logger *slog.Logger }

// Handle publishes an OrderPlaced event.
func (p *publisher) Handle(ctx context.Context, e *outbox.Event) error {
	p.logger.InfoContext(ctx, "published OrderPlaced", "event_id", e.ID, "order_id", e.AggregateID)
	return nil
}

// newOrderPlacedListener routes OrderPlaced events of Order aggregates to a publisher.
func newOrderPlacedListener(logger *slog.Logger) outboxfx.Listener {
	return outboxfx.Listener{
		AggregateType: aggregateOrder,
		EventType:     eventOrderPlaced,
		Listener:      &publisher{logger: logger},
	}
}

// mailer stands for an email service whose mail server refuses every address at
// bounce.example.
type mailer struct{ logger *slog.Logger }

// Handle sends the confirmation email of a ConfirmationEmailRequested event. An error
// makes the outbox retry the event with backoff, until it is DEAD after MaxAttempts
// failures.
func (m *mailer) Handle(ctx context.Context, e *outbox.Event) error {
	var email confirmationEmail
	if err := json.Unmarshal(e.Payload, &email); err != nil {
		// Retrying cannot fix a bad payload: Dead makes the event DEAD at once.
		return outbox.Dead(fmt.Errorf("decode payload: %w", err))
	}
	if strings.HasSuffix(email.To, "@bounce.example") {
		// The outbox logs each failed attempt (WARN, with the next attempt's due
		// time) and the move to DEAD (ERROR).
		return fmt.Errorf("mailbox unavailable: %s", email.To)
	}
	m.logger.InfoContext(ctx, "sent confirmation email", "event_id", e.ID, "order_id", email.OrderID, "to", email.To)
	return nil
}

// newConfirmationEmailListener routes ConfirmationEmailRequested events of Order
// aggregates to a mailer.
func newConfirmationEmailListener(logger *slog.Logger) outboxfx.Listener {
	return outboxfx.Listener{
		AggregateType: aggregateOrder,
		EventType:     eventConfirmationEmail,
		Listener:      &mailer{logger: logger},
	}
}
