package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/fx"

	outboxprom "github.com/outboxkit/outbox/adapters/prometheus"
	outbox "github.com/outboxkit/outbox/core"
	outboxfx "github.com/outboxkit/outbox/fxmodule"
	outboxgin "github.com/outboxkit/outbox/middleware/gin"
)

// newMetrics returns the app's own Prometheus registry, holding the Go and process
// collectors, and the outbox's metrics hook registered on it (newOutboxConfig passes the
// hook to the outbox).
func newMetrics() (*prometheus.Registry, *outboxprom.Metrics, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := outboxprom.New(reg, outboxprom.Options{})
	if err != nil {
		return nil, nil, fmt.Errorf("outbox metrics: %w", err)
	}
	return reg, m, nil
}

// registerOutboxStats adds the collector that counts the outbox table's rows per status
// (outbox_events, outbox_dead_events…) when /metrics is scraped.
func registerOutboxStats(reg *prometheus.Registry, dead *outbox.Events) error {
	stats, err := outboxprom.NewStatsCollector(dead, outboxprom.StatsOptions{})
	if err != nil {
		return fmt.Errorf("outbox stats: %w", err)
	}
	if err := reg.Register(stats); err != nil {
		return fmt.Errorf("register outbox stats: %w", err)
	}
	return nil
}

// newRouter routes the app's requests:
//
//	POST /orders          the orders API
//	     /outbox/admin/   the dead-event admin page and its API
//	GET  /metrics         Prometheus metrics
func newRouter(orders *orderHandler, admin outboxfx.AdminHandler, reg *prometheus.Registry) *gin.Engine {
	r := gin.New()
	r.Use(gin.Recovery())
	r.POST("/orders", orders.create)
	outboxgin.Mount(r.Group("/outbox/admin"), admin)
	r.GET("/metrics", gin.WrapH(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	return r
}

// httpServer serves the router on cfg.addr from the app's start to its stop.
type httpServer struct {
	srv    *http.Server
	addr   net.Addr      // the bound address, set when the app has started
	served chan struct{} // closed when Serve has returned
}

// newHTTPServer returns the server and hooks it to the app's lifecycle. Its start hook
// runs after the outbox's (the router needs the outbox's writer), and its stop hook runs
// first: the server takes no more requests before the outbox drains.
func newHTTPServer(lc fx.Lifecycle, cfg config, router *gin.Engine, logger *slog.Logger) *httpServer {
	s := &httpServer{
		srv: &http.Server{
			Handler:           router,
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		},
		served: make(chan struct{}),
	}
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			ln, err := net.Listen("tcp", cfg.addr)
			if err != nil {
				return fmt.Errorf("listen on %s: %w", cfg.addr, err)
			}
			s.addr = ln.Addr()
			go s.serve(ln, logger)
			return nil
		},
		OnStop: func(ctx context.Context) error {
			err := s.srv.Shutdown(ctx) // waits for the requests in progress
			<-s.served
			logger.Info("http server stopped")
			return err
		},
	})
	return s
}

func (s *httpServer) serve(ln net.Listener, logger *slog.Logger) {
	defer close(s.served)
	if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		logger.Error("http server failed", "error", err)
	}
}

// URL returns the server's base URL, such as http://127.0.0.1:8080.
func (s *httpServer) URL() string { return "http://" + s.addr.String() }
