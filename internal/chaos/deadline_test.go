package chaos

// TestStoreCommitDeadline: every statement of the SQL store is bounded by its context,
// COMMIT included. A proxy blackholes the connection the moment the store sends COMMIT
// (the network dies between the last statement and the commit's answer), and the call
// must return soon after its context's deadline. The process scenarios found this by
// chance (a node that never stopped after a blackhole); here it is deterministic.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// commitPacket is how each driver sends COMMIT: a MySQL COM_QUERY packet (length 7,
// sequence 0, command 3), a PostgreSQL simple Query message. ("COMMIT" alone would
// also match MySQL's SET TRANSACTION ISOLATION LEVEL READ COMMITTED.)
var commitPacket = map[string][]byte{
	"mysql":    []byte("\x07\x00\x00\x00\x03COMMIT"),
	"postgres": []byte("Q\x00\x00\x00\x0bcommit\x00"),
}

func TestStoreCommitDeadline(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"postgres", "mysql"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			cfg := openTarget(t, db)
			d := Dialects[db].Dialect
			if err := outbox.MigrateTable(t.Context(), cfg.db, d, cfg.table); err != nil {
				t.Fatal(err)
			}
			direct, err := outbox.NewSQLStore(cfg.db, d, outbox.SQLStoreConfig{Table: cfg.table})
			if err != nil {
				t.Fatal(err)
			}
			var events []outbox.Event
			for i := range 4 {
				events = append(events, outbox.Event{ID: fmt.Sprintf("e%d", i), Type: EventType,
					AggregateType: AggregateType, Payload: json.RawMessage(`{}`)})
			}
			if _, err := direct.Insert(t.Context(), cfg.db, storage.InsertParams{Events: events}); err != nil {
				t.Fatal(err)
			}

			p, err := NewProxy(HostPort(cfg.dsn))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			pdb, err := sql.Open(Dialects[db].Driver, WithHostPort(cfg.dsn, p.Addr()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { pdb.Close() })
			store, err := outbox.NewSQLStore(pdb, d, outbox.SQLStoreConfig{Table: cfg.table})
			if err != nil {
				t.Fatal(err)
			}

			// call runs f with a one-second deadline while every COMMIT goes into the
			// blackhole, and fails when f is still running ten seconds later.
			call := func(name string, f func(ctx context.Context) error) {
				t.Helper()
				p.Heal()
				p.BlackholeOn(commitPacket[db])
				defer p.BlackholeOn(nil)
				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				defer cancel()
				began := time.Now()
				done := make(chan error, 1)
				go func() { done <- f(ctx) }()
				select {
				case err := <-done:
					t.Logf("%s returned after %s: %v", name, time.Since(began).Round(time.Millisecond), err)
				case <-time.After(10 * time.Second):
					t.Errorf("%s on %s: still blocked %s after its context's deadline (1 s): a COMMIT without a deadline",
						name, db, time.Since(began).Round(time.Millisecond)-time.Second)
					p.Reset() // free it
					<-done
				}
			}
			call("Claim", func(ctx context.Context) error {
				_, err := store.(storage.ClaimStore).Claim(ctx, storage.ClaimParams{Token: "n/1", TTL: time.Minute, Limit: 2})
				return err
			})
			call("MarkDone of two events", func(ctx context.Context) error {
				_, err := store.MarkDone(ctx, storage.MarkDoneParams{IDs: []string{"e2", "e3"}, DoneAt: time.Now()})
				return err
			})
		})
	}
}
