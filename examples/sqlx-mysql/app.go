package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	outboxprom "github.com/outboxkit/outbox/adapters/prometheus"
	outboxsqlx "github.com/outboxkit/outbox/adapters/sqlx"
	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/examples/internal/orderstory"
)

// order is a row of the orders table.
type order struct {
	ID        string    `db:"id"`
	Customer  string    `db:"customer"`
	Item      string    `db:"item"`
	Quantity  int       `db:"quantity"`
	CreatedAt time.Time `db:"created_at"`
}

// createOrders is the DDL of the orders table.
const createOrders = `CREATE TABLE IF NOT EXISTS orders (
	id         VARCHAR(64)  NOT NULL PRIMARY KEY,
	customer   VARCHAR(254) NOT NULL,
	item       VARCHAR(200) NOT NULL,
	quantity   INT          NOT NULL,
	created_at DATETIME(6)  NOT NULL
) DEFAULT CHARSET = utf8mb4`

// insertOrder inserts an order; sqlx binds the named parameters from the order's db tags.
const insertOrder = `INSERT INTO orders (id, customer, item, quantity, created_at)
	VALUES (:id, :customer, :item, :quantity, :created_at)`

// openDB opens the MySQL database with go-sql-driver/mysql, checks that it answers, and
// wraps it in sqlx.
func openDB(ctx context.Context, cfg *mysql.Config) (*sqlx.DB, error) {
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", envDSN, err)
	}
	sqldb := sql.OpenDB(connector)
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := sqldb.PingContext(pingCtx); err != nil {
		_ = sqldb.Close()
		return nil, fmt.Errorf("connect to MySQL at %s: %w", maskDSN(cfg), err)
	}
	return sqlx.NewDb(sqldb, "mysql"), nil
}

// migrate creates the outbox table and the orders table if they do not exist.
func migrate(ctx context.Context, db *sqlx.DB) error {
	if err := outbox.Migrate(ctx, db.DB, outbox.MySQL); err != nil {
		return fmt.Errorf("migrate outbox table: %w", err)
	}
	if _, err := db.ExecContext(ctx, createOrders); err != nil {
		return fmt.Errorf("create orders table: %w", err)
	}
	return nil
}

// app holds what the HTTP handlers use.
type app struct {
	db      *sqlx.DB
	outbox  *outbox.Outbox
	metrics *prometheus.Registry
	logger  *slog.Logger
}

// newApp builds the outbox over db, with its listeners and its metrics on a private
// registry. Nothing runs until the outbox is started.
func newApp(db *sqlx.DB, logger *slog.Logger) (*app, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	metrics, err := outboxprom.New(reg, outboxprom.Options{})
	if err != nil {
		return nil, fmt.Errorf("outbox metrics: %w", err)
	}
	ob, err := outbox.New(db.DB, outbox.Config{
		Dialect: outbox.MySQL,
		// Settings for watching the story: a failing event is DEAD within seconds.
		MaxAttempts:  orderstory.MaxAttempts,
		Retry:        outbox.ExponentialBackoff{Base: 500 * time.Millisecond, Max: 2 * time.Second},
		PollInterval: time.Second,
		Logger:       logger,
		Metrics:      metrics,
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	stats, err := outboxprom.NewStatsCollector(ob.Events(), outboxprom.StatsOptions{Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("outbox table metrics: %w", err)
	}
	if err := reg.Register(stats); err != nil {
		return nil, fmt.Errorf("outbox table metrics: %w", err)
	}
	if err := orderstory.RegisterListeners(ob, logger); err != nil {
		return nil, err
	}
	return &app{db: db, outbox: ob, metrics: reg, logger: logger}, nil
}

// routes returns the router with the orders API and /metrics. The admin is mounted by
// the caller.
func (a *app) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", a.createOrder)
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.metrics, promhttp.HandlerOpts{}))
	return mux
}

// createOrder handles POST /orders. The body is read as JSON whatever its Content-Type,
// so that curl -d works as it is.
func (a *app) createOrder(w http.ResponseWriter, r *http.Request) {
	req, err := orderstory.DecodeOrder(http.MaxBytesReader(w, r.Body, orderstory.MaxBodyBytes))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, orderstory.ErrorBody{Error: err.Error()})
		return
	}
	resp, err := a.placeOrder(r.Context(), req)
	if err != nil {
		a.logger.ErrorContext(r.Context(), "place order", slog.String("error", err.Error()))
		writeJSON(w, http.StatusInternalServerError, orderstory.ErrorBody{Error: "the order could not be placed"})
		return
	}
	writeJSON(w, http.StatusCreated, resp)
}

// placeOrder inserts the order and its two events in one sqlx transaction. The events
// are handed to the dispatcher once the transaction has committed.
func (a *app) placeOrder(ctx context.Context, req orderstory.OrderRequest) (orderstory.OrderResponse, error) {
	o := order{
		ID:        outbox.NewID(),
		Customer:  req.Customer,
		Item:      req.Item,
		Quantity:  req.Quantity,
		CreatedAt: time.Now().UTC(),
	}
	var eventIDs []string
	err := outboxsqlx.RunInTx(ctx, a.db, nil, func(ctx context.Context, tx *sqlx.Tx) error {
		if _, err := tx.NamedExecContext(ctx, insertOrder, o); err != nil {
			return fmt.Errorf("insert order: %w", err)
		}
		for _, env := range orderstory.OrderEvents(o.ID, o.Customer, o.Item, o.Quantity) {
			id, err := outboxsqlx.Write(ctx, tx, a.outbox.Writer(), env)
			if err != nil {
				return fmt.Errorf("write %s: %w", env.Type, err)
			}
			eventIDs = append(eventIDs, id)
		}
		return nil
	})
	if err != nil {
		return orderstory.OrderResponse{}, err
	}
	a.logger.InfoContext(ctx, "order placed", slog.String("order_id", o.ID), slog.String("customer", o.Customer),
		slog.Any("event_ids", eventIDs))
	return orderstory.OrderResponse{OrderID: o.ID, Events: eventIDs}, nil
}

// writeJSON sends v as a JSON response with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client is gone if this fails
}
