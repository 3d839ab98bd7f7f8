package outbox_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// TestPromoteKeepsOneHeadPerKey races every way a key moves on (promotes by key, by ID
// and by sweep, read back and claimed, right after DONE and RETRY writes of the keys' heads, from several
// goroutines at once) over a few busy keys, while a checker reads the table: no key may
// ever have two events NEW or RETRY at once, nor one behind a WAITING event of its key
// (the one-at-a-time, in-order rule of ordered delivery), and every event ends DONE.
func TestPromoteKeepsOneHeadPerKey(t *testing.T) {
	t.Parallel()
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			b := s.setup(t)
			if s.name == "sqlite" {
				// One connection, as the library asks of SQLite users (docs/databases.md):
				// through several, the goroutines below wait for SQLite's one write lock
				// in its busy handler, which serves them in no order, and under load one
				// of them waited past the store's QueryTimeout. SQLite runs one write
				// transaction at a time either way, so the race is the same.
				b.db.SetMaxOpenConns(1)
			}
			ctx := context.Background()
			const keys, perKey = 8, 40
			base := time.Now().Add(-time.Hour).UTC().Truncate(time.Microsecond)
			for k := range keys {
				tx, err := b.db.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				var events []outbox.Event
				for i := range perKey {
					e := testEvent(fmt.Sprintf("k%d-%03d", k, i), base.Add(time.Duration(i)*time.Millisecond))
					e.OrderKey = fmt.Sprint("k", k)
					events = append(events, e)
				}
				if _, err := b.store.Insert(ctx, tx, storage.InsertParams{Events: events}); err != nil {
					t.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
			}
			if s.name == "postgres" {
				// A table in service has statistics (autovacuum analyzes it). Without
				// them PostgreSQL plans the promote's subqueries of this fresh table as
				// scans (docs/operations.md, "the first minute of a new table"), each
				// promote then takes seconds under the race below on two shared cores,
				// and the test measures the planner instead of the promote's locking.
				if _, err := b.db.ExecContext(ctx, "ANALYZE "+b.quoted()); err != nil {
					t.Fatal(err)
				}
			}
			allKeys := make([]string, keys)
			for k := range allKeys {
				allKeys[k] = fmt.Sprint("k", k)
			}
			q := b.quoted()
			var (
				stop atomic.Bool
				wg   sync.WaitGroup
				mu   sync.Mutex
				bad  []string
			)
			finish := func(rng *rand.Rand, e outbox.Event) {
				var err error
				if rng.IntN(5) == 0 { // a failed attempt: RETRY, due at once
					_, err = b.store.Reschedule(ctx, storage.RescheduleParams{ID: e.ID, Status: outbox.StatusRetry,
						AvailableAt: time.Now().Add(-time.Second), CountAttempt: true, LastError: "transient", Token: e.LockedBy})
				} else {
					_, err = b.store.MarkDone(ctx, storage.MarkDoneParams{IDs: []string{e.ID}, DoneAt: time.Now(), Token: e.LockedBy})
				}
				if err != nil {
					t.Error(err)
				}
			}
			// Writers: more events for random keys, each key locked for a moment before
			// the commit, then promoted by ID with a claim, as a writer does after its
			// commit (the claim is given back).
			var written atomic.Int64
			for g := range 2 {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(g), 11))
					for i := 0; !stop.Load() && i < 100; i++ {
						tx, err := b.db.BeginTx(ctx, nil)
						if err != nil {
							t.Error(err)
							return
						}
						k := rng.IntN(keys)
						e := testEvent(fmt.Sprintf("w%d-%03d", g, i), time.Now().Add(-time.Hour))
						e.OrderKey = fmt.Sprint("k", k)
						if _, err := b.store.Insert(ctx, tx, storage.InsertParams{Events: []outbox.Event{e}}); err != nil {
							_ = tx.Rollback()
							t.Error(err)
							return
						}
						time.Sleep(time.Duration(rng.IntN(5)) * time.Millisecond)
						if err := tx.Commit(); err != nil {
							t.Error(err)
							return
						}
						written.Add(1)
						token := fmt.Sprintf("writer%d/%d", g, i)
						res, err := b.store.Promote(ctx, storage.PromoteParams{IDs: []string{e.ID}, Token: token, TTL: time.Minute})
						if err != nil {
							t.Error(err)
							return
						}
						if res.Promoted > 0 {
							if _, err := b.store.MarkDone(ctx, storage.MarkDoneParams{IDs: []string{e.ID}, DoneAt: time.Now(), Token: token}); err != nil {
								t.Error(err)
							}
						}
						if _, err := b.store.Promote(ctx, storage.PromoteParams{Keys: []string{e.OrderKey}}); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			// Deliverers: take the NEW rows, mark them DONE, promote in one of three ways.
			for g := range 6 {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(g), 7))
					for !stop.Load() {
						claimed, err := b.store.Claim(ctx, storage.ClaimParams{Token: fmt.Sprintf("d%d/%d", g, rng.Int()),
							TTL: time.Minute, Limit: 20})
						if err != nil {
							t.Error(err)
							return
						}
						if len(claimed.Events) == 0 {
							time.Sleep(time.Millisecond) // nothing NEW now: let the others run
						}
						var ks []string
						for _, e := range claimed.Events {
							finish(rng, e)
							ks = append(ks, e.OrderKey)
						}
						var p storage.PromoteParams
						switch rng.IntN(5) {
						case 0:
							p.Keys = ks
						case 1:
							p.Keys = allKeys
						case 2: // by ID, as a writer after its commit: some WAITING events
							p.IDs = waitingIDs(t, b, rng)
						case 3: // read back and claimed, as a dispatcher after its outcomes
							p.Keys, p.Read = ks, true
							p.Token, p.TTL = fmt.Sprintf("d%d/%d", g, rng.Int()), time.Minute
						}
						if len(p.Keys) == 0 && len(p.IDs) == 0 {
							p.Limit = 100
						}
						res, err := b.store.Promote(ctx, p)
						if err != nil {
							t.Error(err)
							return
						}
						for _, e := range res.Events { // handed over: delivered at once
							if e.LockedBy != p.Token || e.Status != outbox.StatusNew {
								t.Errorf("promote returned %s %s claimed by %q, want NEW claimed by %q", e.ID, e.Status, e.LockedBy, p.Token)
							}
							finish(rng, e)
						}
					}
				})
			}
			// The checker.
			wg.Go(func() {
				for !stop.Load() {
					rows, err := b.db.QueryContext(ctx, "SELECT order_key, COUNT(*) FROM "+q+
						" WHERE status IN (0, 2) AND order_key IS NOT NULL GROUP BY order_key HAVING COUNT(*) > 1")
					if err != nil {
						t.Error(err)
						return
					}
					for rows.Next() {
						var k string
						var n int
						_ = rows.Scan(&k, &n)
						mu.Lock()
						bad = append(bad, fmt.Sprintf("%s: %d heads", k, n))
						mu.Unlock()
					}
					rows.Close()
					rows, err = b.db.QueryContext(ctx, "SELECT h.event_id FROM "+q+" h WHERE h.status IN (0, 2) AND h.order_key IS NOT NULL"+
						" AND EXISTS (SELECT 1 FROM "+q+" w WHERE w.order_key = h.order_key AND w.status = 4 AND w.order_seq < h.order_seq)")
					if err != nil {
						t.Error(err)
						return
					}
					for rows.Next() {
						var id string
						_ = rows.Scan(&id)
						mu.Lock()
						bad = append(bad, id+": head behind a WAITING event")
						mu.Unlock()
					}
					rows.Close()
				}
			})
			// Every store call is bounded by the store's QueryTimeout, and each claimed
			// event is finished at once: a run in which no event became DONE for a few
			// QueryTimeouts has stopped, however slowly a loaded machine runs it.
			var left int
			err := waitProgress("events DONE", 6*storeQueryTimeout, func() (bool, int64) {
				var done int64
				if err := b.db.QueryRowContext(ctx, "SELECT COUNT(CASE WHEN status = 1 THEN 1 END), COUNT(CASE WHEN status <> 1 THEN 1 END) FROM "+q).Scan(&done, &left); err != nil {
					t.Error(err)
					return true, 0
				}
				return left == 0, done
			})
			stop.Store(true)
			wg.Wait()
			if err != nil {
				t.Fatalf("%v; %d events not DONE", err, left)
			}
			if len(bad) > 0 {
				t.Fatalf("keys with more than one head at once (%d times): %v", len(bad), bad[:min(len(bad), 10)])
			}
		})
	}
}

// waitingIDs returns a few WAITING events, any keys.
func waitingIDs(t *testing.T, b sqlBundle, rng *rand.Rand) []string {
	rows, err := b.db.QueryContext(context.Background(), "SELECT event_id FROM "+b.quoted()+" WHERE status = 4")
	if err != nil {
		t.Error(err)
		return nil
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err == nil && rng.IntN(8) == 0 {
			ids = append(ids, id)
		}
	}
	return ids
}
