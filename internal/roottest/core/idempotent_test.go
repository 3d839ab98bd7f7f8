package outbox_test

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"

	outbox "github.com/outboxkit/outbox/core"
)

// TestIdempotentWriteIsANoOp writes an event whose ID was committed before, beside a new
// one, in a transaction that goes on writing business rows afterwards: the write
// reports the existing event, the transaction commits everything, and the existing
// event is neither changed nor delivered again.
func TestIdempotentWriteIsANoOp(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		a := setupOutbox(t, b, outbox.Config{})
		d := newDeliveries(nil)
		if err := a.ob.Register("Order", "OrderPlaced", d); err != nil {
			t.Fatal(err)
		}
		a.start(t)
		ctx := context.Background()
		first := orderPlaced
		first.ID = "req-1"
		if id, err := a.placeOrder(ctx, "o1", first, nil); err != nil || id != "req-1" {
			t.Fatalf("first write = %q, %v", id, err)
		}
		eventually(t, "req-1 delivered", func() bool { return a.event(t, "req-1").Status == outbox.StatusDone })

		again := first
		again.Payload = map[string]string{"k": "changed"}
		second := orderPlaced
		second.ID = "req-2"
		var written []outbox.Written
		err := outbox.RunInTx(ctx, a.db, func(ctx context.Context, tx *outbox.Tx) error {
			insert := `INSERT INTO ` + a.orders + ` (id) VALUES (` + ph1(a.dialect) + `)`
			if _, err := tx.ExecContext(ctx, insert, "o2"); err != nil {
				return err
			}
			var err error
			if written, err = a.ob.Writer().WriteAllReport(ctx, tx, []outbox.Envelope{again, second}); err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, insert, "o3") // the transaction is still usable
			return err
		})
		if err != nil {
			t.Fatalf("transaction with an existing ID: %v", err)
		}
		if want := []outbox.Written{{ID: "req-1", Existed: true}, {ID: "req-2"}}; !slices.Equal(written, want) {
			t.Fatalf("WriteAllReport = %+v, want %+v", written, want)
		}
		if n := a.count(t, a.orders); n != 3 {
			t.Fatalf("%d business rows, want 3", n)
		}
		eventually(t, "req-2 delivered", func() bool { return a.event(t, "req-2").Status == outbox.StatusDone })
		if e := a.event(t, "req-1"); e.Status != outbox.StatusDone || !strings.Contains(string(e.Payload), `"v"`) {
			t.Fatalf("existing event changed: %s %s", e.Status, e.Payload)
		}
		// The hot path and the poller had their chance at req-2; req-1 ran once.
		if n := d.of("req-1"); n != 1 {
			t.Fatalf("req-1 delivered %d times, want 1", n)
		}
		// Write (one envelope) returns the existing ID too.
		if id, err := a.placeOrder(ctx, "o4", first, nil); err != nil || id != "req-1" {
			t.Fatalf("Write of an existing ID = %q, %v; want req-1", id, err)
		}
	})
}

// TestIdempotentWriteRacesAnotherTransaction writes one ID from two transactions at
// once: the second waits for the first's row lock and, whether the first commits or
// rolls back, ends without an error and with a usable transaction, reporting the
// event as existing only when the first committed it. SQLite runs one writing
// transaction at a time, so the second cannot start its write before the first ends.
func TestIdempotentWriteRacesAnotherTransaction(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		if b.dialect == outbox.SQLite {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			a := setupOutbox(t, b, outbox.Config{Mode: outbox.WriterOnly})
			for _, commit := range []bool{true, false} {
				env := orderPlaced
				env.ID = "race-" + map[bool]string{true: "commit", false: "rollback"}[commit]
				ctx := context.Background()
				tx1, err := a.db.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := a.ob.Writer().Write(ctx, tx1, env); err != nil {
					t.Fatal(err)
				}
				type result struct {
					written []outbox.Written
					err     error
				}
				done := make(chan result, 1)
				go func() {
					var r result
					r.err = outbox.RunInTx(ctx, a.db, func(ctx context.Context, tx *outbox.Tx) error {
						var err error
						if r.written, err = a.ob.Writer().WriteAllReport(ctx, tx, []outbox.Envelope{env}); err != nil {
							return err
						}
						_, err = tx.ExecContext(ctx, `INSERT INTO `+a.orders+` (id) VALUES (`+ph1(a.dialect)+`)`, env.ID)
						return err
					})
					done <- r
				}()
				var early *result
				eventually(t, "the second write waits for the first's row", func() bool {
					select {
					case r := <-done:
						early = &r
						return true
					default:
						return lockWaits(t, a.db, b.dialect, a.table) > 0
					}
				})
				if early != nil {
					t.Fatalf("the second write did not wait for the first's row: %+v", *early)
				}
				if commit {
					err = tx1.Commit()
				} else {
					err = tx1.Rollback()
				}
				if err != nil {
					t.Fatal(err)
				}
				r := <-done
				if r.err != nil {
					t.Fatalf("commit=%v: second transaction: %v", commit, r.err)
				}
				if want := []outbox.Written{{ID: env.ID, Existed: commit}}; !slices.Equal(r.written, want) {
					t.Fatalf("commit=%v: second write = %+v, want %+v", commit, r.written, want)
				}
				if e := a.event(t, env.ID); e.Status != outbox.StatusNew {
					t.Fatalf("%s is %s", env.ID, e.Status)
				}
			}
			if n := a.count(t, a.orders); n != 2 {
				t.Fatalf("%d business rows, want 2", n)
			}
		})
	}
}

// lockWaits counts the sessions waiting for a lock in a statement on table (on
// MySQL/MariaDB, running an INSERT into it).
func lockWaits(t *testing.T, db *sql.DB, d outbox.Dialect, table string) int {
	t.Helper()
	name := table // an isolated table's schema (or database) names it alone
	if i := strings.LastIndex(table, "."); i > 0 {
		name = table[:i]
	}
	q := `SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'`
	if d == outbox.MySQL {
		// MariaDB lists the waiting INSERT in the process list, not in innodb_trx.
		q = `SELECT COUNT(*) FROM information_schema.processlist WHERE info LIKE CONCAT('INSERT INTO %', ?, '%')`
	}
	var n int
	if err := db.QueryRow(q, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
