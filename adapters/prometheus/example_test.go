package outboxprom_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	_ "modernc.org/sqlite"

	outboxprom "github.com/outboxkit/outbox/adapters/prometheus"
	outbox "github.com/outboxkit/outbox/core"
)

// Example wires the metrics hook and the stats collector of one outbox into a registry
// and serves them on /metrics.
func Example() {
	dir, err := os.MkdirTemp("", "outboxprom-example-*")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", outbox.SQLiteDSN(filepath.Join(dir, "example.db")))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := outbox.Migrate(ctx, db, outbox.SQLite); err != nil {
		panic(err)
	}

	// One registry for the application; never the global one.
	reg := prometheus.NewRegistry()
	metrics, err := outboxprom.New(reg, outboxprom.Options{Instance: "orders"})
	if err != nil {
		panic(err)
	}
	ob, err := outbox.New(db, outbox.Config{Dialect: outbox.SQLite, Metrics: metrics})
	if err != nil {
		panic(err)
	}
	stats, err := outboxprom.NewStatsCollector(ob.Events(), outboxprom.StatsOptions{Instance: "orders"})
	if err != nil {
		panic(err)
	}
	if err := reg.Register(stats); err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))

	err = ob.Register("Order", "OrderPlaced", outbox.ListenerFunc(func(context.Context, *outbox.Event) error {
		return nil
	}))
	if err != nil {
		panic(err)
	}
	if err := ob.Start(ctx); err != nil {
		panic(err)
	}
	err = outbox.RunInTx(ctx, db, func(ctx context.Context, tx *outbox.Tx) error {
		_, err := ob.Writer().Write(ctx, tx, outbox.Envelope{Type: "OrderPlaced", AggregateType: "Order", Payload: 1})
		return err
	})
	if err != nil {
		panic(err)
	}
	// Stop drains: the event is delivered and measured before it returns.
	if err := ob.Stop(ctx); err != nil {
		panic(err)
	}

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		line := sc.Text()
		for _, prefix := range []string{
			"outbox_hot_enqueued_total", `outbox_dispatch_total{outbox="orders",outcome="done",path="hot"}`,
			"outbox_events{", "outbox_stats_up",
		} {
			if strings.HasPrefix(line, prefix) {
				fmt.Println(line)
			}
		}
	}
	// Output:
	// outbox_dispatch_total{outbox="orders",outcome="done",path="hot"} 1
	// outbox_events{outbox="orders",status="dead"} 0
	// outbox_events{outbox="orders",status="discarded"} 0
	// outbox_events{outbox="orders",status="done"} 1
	// outbox_events{outbox="orders",status="fallback"} 0
	// outbox_events{outbox="orders",status="new"} 0
	// outbox_events{outbox="orders",status="retry"} 0
	// outbox_events{outbox="orders",status="waiting"} 0
	// outbox_hot_enqueued_total{outbox="orders"} 1
	// outbox_stats_up{outbox="orders"} 1
}
