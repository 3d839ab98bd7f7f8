package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	outboxbun "github.com/outboxkit/outbox/adapters/bun"
	outboxprom "github.com/outboxkit/outbox/adapters/prometheus"
	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/examples/internal/orderstory"
)

// order is a row of the orders table.
type order struct {
	bun.BaseModel `bun:"table:orders"`

	ID        string    `bun:"id,pk"`
	Customer  string    `bun:"customer,notnull"`
	Item      string    `bun:"item,notnull"`
	Quantity  int       `bun:"quantity,notnull"`
	CreatedAt time.Time `bun:"created_at,notnull"`
}

// openDB opens the PostgreSQL database with the pgx driver, checks that it answers, and
// wraps it in bun.
func openDB(ctx context.Context, dsn string) (*bun.DB, error) {
	sqldb, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := sqldb.PingContext(pingCtx); err != nil {
		_ = sqldb.Close()
		return nil, fmt.Errorf("connect to PostgreSQL at %s: %w", maskDSN(dsn), err)
	}
	return bun.NewDB(sqldb, pgdialect.New()), nil
}

// migrate creates the outbox table and the orders table if they do not exist.
func migrate(ctx context.Context, db *bun.DB) error {
	if err := outbox.Migrate(ctx, db.DB, outbox.Postgres); err != nil {
		return fmt.Errorf("migrate outbox table: %w", err)
	}
	if _, err := db.NewCreateTable().Model((*order)(nil)).IfNotExists().Exec(ctx); err != nil {
		return fmt.Errorf("create orders table: %w", err)
	}
	return nil
}

// app holds what the HTTP handlers use.
type app struct {
	db      *bun.DB
	outbox  *outbox.Outbox
	metrics *prometheus.Registry
	logger  *slog.Logger
}

// newApp builds the outbox over db, with its listeners and its metrics on a private
// registry. Nothing runs until the outbox is started.
func newApp(db *bun.DB, logger *slog.Logger) (*app, error) {
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
		Dialect: outbox.Postgres,
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

// routes returns the echo router with the orders API and /metrics. The admin is mounted
// by the caller.
func (a *app) routes() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.POST("/orders", a.createOrder)
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(a.metrics, promhttp.HandlerOpts{})))
	return e
}

// createOrder handles POST /orders. The body is read as JSON whatever its Content-Type,
// so that curl -d works as it is.
func (a *app) createOrder(c echo.Context) error {
	req, err := orderstory.DecodeOrder(http.MaxBytesReader(c.Response(), c.Request().Body, orderstory.MaxBodyBytes))
	if err != nil {
		return c.JSON(http.StatusBadRequest, orderstory.ErrorBody{Error: err.Error()})
	}
	ctx := c.Request().Context()
	resp, err := a.placeOrder(ctx, req)
	if err != nil {
		a.logger.ErrorContext(ctx, "place order", slog.String("error", err.Error()))
		return c.JSON(http.StatusInternalServerError, orderstory.ErrorBody{Error: "the order could not be placed"})
	}
	return c.JSON(http.StatusCreated, resp)
}

// placeOrder inserts the order and its two events in one bun transaction. The events are
// handed to the dispatcher once the transaction has committed.
func (a *app) placeOrder(ctx context.Context, req orderstory.OrderRequest) (orderstory.OrderResponse, error) {
	o := order{
		ID:        outbox.NewID(),
		Customer:  req.Customer,
		Item:      req.Item,
		Quantity:  req.Quantity,
		CreatedAt: time.Now().UTC(),
	}
	var eventIDs []string
	err := outboxbun.RunInTx(ctx, a.db, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewInsert().Model(&o).Exec(ctx); err != nil {
			return fmt.Errorf("insert order: %w", err)
		}
		for _, env := range orderstory.OrderEvents(o.ID, o.Customer, o.Item, o.Quantity) {
			id, err := outboxbun.Write(ctx, tx, a.outbox.Writer(), env)
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
