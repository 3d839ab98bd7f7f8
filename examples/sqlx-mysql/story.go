package main

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

// maxAttempts is the outbox's MaxAttempts: after this many failed deliveries an event is
// DEAD.
const maxAttempts = 3

// maxBodyBytes bounds the body of POST /orders.
const maxBodyBytes = 64 << 10

// bounceDomain is the domain whose mailboxes the pretend mail service rejects.
const bounceDomain = "@bounce.example"

// orderRequest is the body of POST /orders.
type orderRequest struct {
	Customer string `json:"customer"`
	Item     string `json:"item"`
	Quantity int    `json:"quantity"`
}

// orderResponse is the body of a 201 answer to POST /orders.
type orderResponse struct {
	OrderID string   `json:"order_id"`
	Events  []string `json:"events"`
}

// errorBody is the body of an error answer.
type errorBody struct {
	Error string `json:"error"`
}

// decodeOrder reads one JSON order from r and validates it.
func decodeOrder(r io.Reader) (orderRequest, error) {
	var req orderRequest
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

// orderEvents returns the two events a new order writes.
func orderEvents(orderID, customer, item string, quantity int) []outbox.Envelope {
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

// registerListeners routes the two event types to their listeners.
func registerListeners(ob *outbox.Outbox, logger *slog.Logger) error {
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
// bounce.example. Each failure is logged here; the outbox retries the event and, after
// maxAttempts failures, moves it to DEAD.
func sendConfirmationEmail(logger *slog.Logger) outbox.ListenerFunc {
	return func(ctx context.Context, e *outbox.Event) error {
		var p confirmationEmail
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			return fmt.Errorf("%w: decode payload: %w", outbox.ErrUnrecoverable, err)
		}
		if strings.HasSuffix(strings.ToLower(p.To), bounceDomain) {
			err := fmt.Errorf("mailbox unavailable: %s", p.To)
			logger.WarnContext(ctx, "confirmation email failed",
				slog.String("event_id", e.ID), slog.String("order_id", p.OrderID),
				slog.Int("attempt", e.Attempts+1), slog.Int("max_attempts", maxAttempts),
				slog.String("error", err.Error()))
			return err
		}
		logger.InfoContext(ctx, "sent confirmation email",
			slog.String("event_id", e.ID), slog.String("order_id", p.OrderID), slog.String("to", p.To))
		return nil
	}
}
