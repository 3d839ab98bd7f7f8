package outbox_test

import (
	"strconv"
	"testing"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/internal/testdb"
)

// BenchmarkPostgresWrite times a Writer's write through the SQL store on PostgreSQL, in
// a transaction of its own that commits: one event (Write), a batch of 100 (WriteAll),
// and batches of 1 to 100 events, the batches that the event INSERT's form matters for
// (issue 55). Run it against one
// server, alternating the builds compared:
//
//	go test -run '^$' -bench BenchmarkPostgresWrite -benchmem ./internal/roottest/core/
func BenchmarkPostgresWrite(b *testing.B) {
	db := testdb.NewPostgresDB(b)
	table := testdb.IsolatedTable(b, db, outbox.Postgres.Name())
	if err := outbox.MigrateTable(b.Context(), db, outbox.Postgres, table); err != nil {
		b.Fatal(err)
	}
	ob, err := outbox.New(db, outbox.Config{Mode: outbox.WriterOnly, Dialect: outbox.Postgres, Table: table, Logger: discardLogger()})
	if err != nil {
		b.Fatal(err)
	}
	w := ob.Writer()
	envelope := func(i int) outbox.Envelope {
		return outbox.Envelope{Type: "OrderPlaced", AggregateType: "Order", AggregateID: strconv.Itoa(i),
			Headers: map[string]string{"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"},
			Payload: map[string]any{"order_id": "o-" + strconv.Itoa(i), "amount": i, "currency": "EUR"}}
	}
	// events=1-100 writes batches of every size from 1 to 100, in a fixed shuffled
	// order: a statement whose text depends on the size is a hundred statements.
	for _, n := range []int{1, 100, -100} {
		name := "events=" + strconv.Itoa(n)
		if n < 0 {
			name = "events=1-" + strconv.Itoa(-n)
		}
		b.Run(name, func(b *testing.B) {
			ctx := b.Context()
			envs := make([]outbox.Envelope, max(n, -n))
			b.ReportAllocs()
			i, op := 0, 0
			for b.Loop() {
				envs := envs
				if n < 0 {
					envs = envs[:1+op*37%(-n)]
				}
				op++
				for j := range envs {
					envs[j] = envelope(i)
					i++
				}
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				if n == 1 {
					_, err = w.Write(ctx, tx, envs[0])
				} else {
					_, err = w.WriteAll(ctx, tx, envs)
				}
				if err != nil {
					_ = tx.Rollback()
					b.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
