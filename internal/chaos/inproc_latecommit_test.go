package chaos

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

// TestInprocLateCommit: long transactions that write their events early (OccurredAt an
// hour ago, or the moment the transaction began) and commit late, after many other
// transactions have committed and been delivered. A poller that remembered how far it
// had read by time would skip them; every one must still be delivered, promptly after
// its commit. On PostgreSQL and MariaDB the transactions stay open while the others
// commit; SQLite has one writer at a time, so there the events carry the early time
// but are written at the end.
func TestInprocLateCommit(t *testing.T) {
	seed := Seed(t)
	for _, mode := range queueModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			forEachBackend(t, allBackends, func(t *testing.T, be backend) {
				s := newScene(t, "late-commit/"+mode.name, be, seed, sceneOptions{})
				cfg := mode.cfg
				cfg.PollInterval, cfg.SkipRecent = 50*time.Millisecond, 200*time.Millisecond
				ob := s.start(cfg, "node", succeed)
				// Rounds of long transactions held up to 2 s (long tier: 8 s) each,
				// until the scenario's duration has passed.
				total := Duration(t, shortLoad)
				hold := min(total, 8*time.Second)
				ctx := t.Context()
				const long = 6
				var late []string
				res := &loadResult{}
				for round, deadline := 0, time.Now().Add(total); round == 0 || time.Now().Before(deadline); round++ {
					var wg sync.WaitGroup
					lateIDs := make(chan string, 2*long)
					for i := range long {
						wg.Go(func() {
							kind := txKind(i % 2)
							began := time.Now()
							occurred := []time.Time{began.Add(-time.Hour), began}
							envs := make([]outbox.Envelope, len(occurred))
							for j, at := range occurred {
								envs[j] = envelope(fmt.Sprintf("late-%d-%d-%d", round, i, j))
								envs[j].OccurredAt = at
								lateIDs <- envs[j].ID
							}
							wait := hold * time.Duration(i+1) / long
							if be.name == "sqlite" {
								sleepCtx(ctx, wait)
								if _, err := s.writeTx(context.WithoutCancel(ctx), s.db, ob.Writer(), kind, envs, false); err != nil {
									t.Errorf("late transaction %d: %v", i, err)
								}
								return
							}
							if err := s.lateTx(ctx, ob.Writer(), kind, envs, wait); err != nil {
								t.Errorf("late transaction %d: %v", i, err)
							}
						})
					}
					r := s.load(ctx, ob.Writer(), loadOptions{writers: 3, duration: hold + 300*time.Millisecond, pause: 5 * time.Millisecond,
						prefix: fmt.Sprintf("r%d", round), kind: func(n int) txKind { return txKind(n % 2) }})
					wg.Wait()
					close(lateIDs)
					for id := range lateIDs {
						late = append(late, id)
					}
					res.add(r)
				}
				res.assertNoTxErrors(t)
				s.drain(30 * time.Second)
				s.check(true)

				lat := deliveryLatencies(s.records(), func(id string) bool { return slices.Contains(late, id) })
				t.Logf("%d late events delivered; latency after their commit: max %s", len(lat), percentile(lat, 1))
				if len(lat) != len(late) {
					t.Errorf("%d of %d late events delivered", len(lat), len(late))
				}
				if m := percentile(lat, 1); m > 5*time.Second {
					t.Errorf("a late event waited %s after its commit", m)
				}
				s.assertNoErrorLogs()
			})
		})
	}
}

// lateTx begins a transaction, writes envs (and their business rows) at once, holds the
// transaction open for hold, then commits, recording the outcome.
func (s *scene) lateTx(ctx context.Context, w *outbox.Writer, kind txKind, envs []outbox.Envelope, hold time.Duration) error {
	ctx = context.WithoutCancel(ctx)
	var (
		exec     outbox.Executor
		commit   func() error
		rollback func() error
	)
	if kind == viaOutboxTx {
		tx, err := outbox.BeginTx(ctx, s.db, nil)
		if err != nil {
			return err
		}
		exec, commit, rollback = tx, tx.Commit, tx.Rollback
	} else {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		exec, commit, rollback = tx, tx.Commit, tx.Rollback
	}
	for _, env := range envs {
		if _, err := exec.ExecContext(ctx, "INSERT INTO "+s.orders+" (id) VALUES ("+s.ph(1)+")", env.ID); err != nil {
			_ = rollback()
			return err
		}
	}
	ids, err := w.WriteAll(ctx, exec, envs)
	if err != nil {
		_ = rollback()
		return err
	}
	time.Sleep(hold)
	kindRec := Committed
	cerr := commit()
	if cerr != nil {
		kindRec = Unknown
	}
	for _, id := range ids {
		if err := s.log.Append(Record{Kind: kindRec, Event: id, Node: "late-writer"}); err != nil {
			return err
		}
	}
	return cerr
}
