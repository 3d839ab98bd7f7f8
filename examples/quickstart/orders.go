package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"

	outboxgorm "github.com/outboxkit/outbox/adapters/gorm"
	outbox "github.com/outboxkit/outbox/core"
)

// Order is a row of the orders table, created by gorm's AutoMigrate.
type Order struct {
	ID        string `gorm:"primaryKey"`
	Customer  string `gorm:"not null"`
	Item      string `gorm:"not null"`
	Quantity  int    `gorm:"not null"`
	CreatedAt time.Time
}

// The events of an order. Listeners are registered for (aggregate type, event type).
const (
	aggregateOrder         = "Order"
	eventOrderPlaced       = "OrderPlaced"
	eventConfirmationEmail = "ConfirmationEmailRequested"
)

// orderPlaced is the payload of an OrderPlaced event.
type orderPlaced struct {
	OrderID  string `json:"order_id"`
	Customer string `json:"customer"`
	Item     string `json:"item"`
	Quantity int    `json:"quantity"`
}

// confirmationEmail is the payload of a ConfirmationEmailRequested event.
type confirmationEmail struct {
	OrderID string `json:"order_id"`
	To      string `json:"to"`
}

// orderRequest is the body of POST /orders.
type orderRequest struct {
	Customer string `json:"customer"` // an email address
	Item     string `json:"item"`
	Quantity int    `json:"quantity"`
}

// maxRequestBytes bounds the body of POST /orders.
const maxRequestBytes = 64 << 10

// decodeOrderRequest reads a JSON order from body and validates it. The body is JSON
// whatever the Content-Type says (curl -d sends a form type).
func decodeOrderRequest(body io.Reader) (orderRequest, error) {
	var req orderRequest
	dec := json.NewDecoder(io.LimitReader(body, maxRequestBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("the body must be a JSON object such as "+
			`{"customer":"ada@example.com","item":"book","quantity":1}: %w`, err)
	}
	switch {
	case !strings.Contains(req.Customer, "@"):
		return req, errors.New("customer must be an email address")
	case strings.TrimSpace(req.Item) == "":
		return req, errors.New("item is required")
	case req.Quantity < 1:
		return req, errors.New("quantity must be at least 1")
	}
	return req, nil
}

// orderHandler serves POST /orders.
type orderHandler struct {
	db     *gorm.DB
	writer *outbox.Writer
	logger *slog.Logger
}

// newOrderHandler returns the orders API. The *outbox.Writer comes from outboxfx.Module.
func newOrderHandler(db *gorm.DB, w *outbox.Writer, logger *slog.Logger) *orderHandler {
	return &orderHandler{db: db, writer: w, logger: logger}
}

// orderResponse is the body of a 201 answer to POST /orders.
type orderResponse struct {
	OrderID string   `json:"order_id"`
	Events  []string `json:"events"`
}

// create places an order: the order row and its two events are written in one
// transaction, so either all three exist or none does.
func (h *orderHandler) create(c *gin.Context) {
	req, err := decodeOrderRequest(c.Request.Body)
	if err != nil {
		c.JSON(http.StatusBadRequest, gin.H{"error": err.Error()})
		return
	}
	// Any unique ID does; outbox.NewID's ULIDs sort by creation time.
	order := Order{ID: outbox.NewID(), Customer: req.Customer, Item: req.Item, Quantity: req.Quantity}
	// The events get their IDs here, so that the response can show them; the writer
	// assigns one to an envelope without.
	placed := outbox.Envelope{
		ID:            outbox.NewID(),
		Type:          eventOrderPlaced,
		AggregateType: aggregateOrder,
		AggregateID:   order.ID,
		Payload:       orderPlaced{OrderID: order.ID, Customer: order.Customer, Item: order.Item, Quantity: order.Quantity},
	}
	email := outbox.Envelope{
		ID:            outbox.NewID(),
		Type:          eventConfirmationEmail,
		AggregateType: aggregateOrder,
		AggregateID:   order.ID,
		Payload:       confirmationEmail{OrderID: order.ID, To: order.Customer},
	}

	// outboxgorm.Transaction is gorm's db.Transaction plus an after-commit hook: the
	// events reach the outbox's dispatcher right after the commit, and never when the
	// transaction rolls back.
	err = outboxgorm.Transaction(c.Request.Context(), h.db, func(tx *gorm.DB) error {
		if err := tx.Create(&order).Error; err != nil {
			return fmt.Errorf("insert order: %w", err)
		}
		_, err := outboxgorm.WriteAll(tx, h.writer, []outbox.Envelope{placed, email}) // one INSERT, same transaction
		return err
	})
	if err != nil {
		h.logger.ErrorContext(c.Request.Context(), "place order", "error", err)
		c.JSON(http.StatusInternalServerError, gin.H{"error": "the order could not be saved"})
		return
	}
	h.logger.InfoContext(c.Request.Context(), "order placed", "order_id", order.ID, "customer", order.Customer)
	c.JSON(http.StatusCreated, orderResponse{OrderID: order.ID, Events: []string{placed.ID, email.ID}})
}
