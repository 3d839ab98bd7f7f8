// Package orderstory is the order service the echo-bun-postgres and sqlx-mysql examples
// share: the POST /orders body and its validation, the two events an order writes, and
// the listeners that publish them (one fails for @bounce.example addresses, so that an
// event retries and ends DEAD). Each example wires it to its own stack.
package orderstory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	outbox "github.com/outboxkit/outbox/core"
)

// MaxAttempts is the outbox's MaxAttempts: after this many failed deliveries an event is
// DEAD.
const MaxAttempts = 3

// MaxBodyBytes bounds the body of POST /orders.
const MaxBodyBytes = 64 << 10

// bounceDomain is the domain whose mailboxes the pretend mail service rejects.
const bounceDomain = "@bounce.example"

// OrderRequest is the body of POST /orders.
type OrderRequest struct {
	Customer string `json:"customer"`
	Item     string `json:"item"`
	Quantity int    `json:"quantity"`
}

// OrderResponse is the body of a 201 answer to POST /orders.
type OrderResponse struct {
	OrderID string   `json:"order_id"`
	Events  []string `json:"events"`
}

// ErrorBody is the body of an error answer.
type ErrorBody struct {
	Error string `json:"error"`
}

// DecodeOrder reads one JSON order from r and validates it.
func DecodeOrder(r io.Reader) (OrderRequest, error) {
	var req OrderRequest
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("invalid JSON body: %w", err)
	}
	if dec.Decode(new(json.RawMessage)) != io.EOF {
		return req, errors.New("invalid JSON body: more than one value")
	}
	switch {
	case !strings.Contains(req.Customer, "@"):
		return req, errors.New(`"customer" must be an email address`)
	case strings.TrimSpace(req.Item) == "":
		return req, errors.New(`"item" is required`)
	case req.Quantity < 1:
		return req, errors.New(`"quantity" must be at least 1`)
	}
	return req, nil
}

// Event types and the aggregate type of the orders' events.
const (
	aggregateOrder                 = "Order"
	typeOrderPlaced                = "OrderPlaced"
	typeConfirmationEmailRequested = "ConfirmationEmailRequested"
)

// orderPlaced is the payload of OrderPlaced.
type orderPlaced struct {
	OrderID  string `json:"order_id"`
	Customer string `json:"customer"`
	Item     string `json:"item"`
	Quantity int    `json:"quantity"`
}

// confirmationEmail is the payload of ConfirmationEmailRequested.
type confirmationEmail struct {
	OrderID string `json:"order_id"`
	To      string `json:"to"`
}

// OrderEvents returns the two events a new order writes.
func OrderEvents(orderID, customer, item string, quantity int) []outbox.Envelope {
	return []outbox.Envelope{
		{
			Type:          typeOrderPlaced,
			AggregateType: aggregateOrder,
			AggregateID:   orderID,
			Payload:       orderPlaced{OrderID: orderID, Customer: customer, Item: item, Quantity: quantity},
		},
		{
			Type:          typeConfirmationEmailRequested,
			AggregateType: aggregateOrder,
			AggregateID:   orderID,
			Payload:       confirmationEmail{OrderID: orderID, To: customer},
		},
	}
}

// RegisterListeners routes the two event types to their listeners.
func RegisterListeners(ob *outbox.Outbox, logger *slog.Logger) error {
	if err := ob.Register(aggregateOrder, typeOrderPlaced, publishOrderPlaced(logger)); err != nil {
		return fmt.Errorf("register %s: %w", typeOrderPlaced, err)
	}
	if err := ob.Register(aggregateOrder, typeConfirmationEmailRequested, sendConfirmationEmail(logger)); err != nil {
		return fmt.Errorf("register %s: %w", typeConfirmationEmailRequested, err)
	}
	return nil
}

// publishOrderPlaced stands for publishing to a message broker: it logs the event.
func publishOrderPlaced(logger *slog.Logger) outbox.ListenerFunc {
	return func(ctx context.Context, e *outbox.Event) error {
		logger.InfoContext(ctx, "published OrderPlaced",
			slog.String("event_id", e.ID), slog.String("order_id", e.AggregateID))
		return nil
	}
}

// sendConfirmationEmail stands for a mail service that rejects every mailbox at
// bounce.example. The outbox logs each failed attempt and retries the event and, after
// MaxAttempts failures, moves it to DEAD.
func sendConfirmationEmail(logger *slog.Logger) outbox.ListenerFunc {
	return func(ctx context.Context, e *outbox.Event) error {
		var p confirmationEmail
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			return outbox.Dead(fmt.Errorf("decode payload: %w", err))
		}
		if strings.HasSuffix(strings.ToLower(p.To), bounceDomain) {
			return fmt.Errorf("mailbox unavailable: %s", p.To)
		}
		logger.InfoContext(ctx, "sent confirmation email",
			slog.String("event_id", e.ID), slog.String("order_id", p.OrderID), slog.String("to", p.To))
		return nil
	}
}
