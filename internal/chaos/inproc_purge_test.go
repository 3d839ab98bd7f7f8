package chaos

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

// bulkEvent is the event type the purge scenario replays by filter (ReplayAll).
const bulkEvent = "Bulk"

// TestInprocPurgeRacingReplay: the purger deletes DONE and DEAD rows a few
// milliseconds after they finish, in small batches, while replayers bring DEAD events
// back, one by one (Events.Replay) and by filter (ReplayAll). Half of the events
// fail unrecoverably on their first attempt and succeed once replayed. Whatever the
// interleaving: no error escapes either side; an event whose replay succeeded is
// delivered (the purge must not delete a row replayed under it); an event found
// purged is never delivered or seen again; by filter, as many events are delivered as
// ReplayAll reported replayed.
func TestInprocPurgeRacingReplay(t *testing.T) {
	seed := Seed(t)
	forEachBackend(t, allBackends, func(t *testing.T, be backend) {
		s := newScene(t, "purge-racing-replay", be, seed, sceneOptions{deadOK: true})
		var attempts attemptCounter
		diesFirst := func(id string) bool { return chance(seed, id, "dies") < 0.5 }
		behave := func(ctx context.Context, e *outbox.Event) error {
			if attempts.next(e.ID) == 1 && diesFirst(e.ID) {
				return fmt.Errorf("chaos: dies first: %w", outbox.ErrUnrecoverable)
			}
			return nil
		}
		ob := s.newOutbox(outbox.Config{PollInterval: 20 * time.Millisecond, SkipRecent: 50 * time.Millisecond,
			PurgeInterval: 10 * time.Millisecond, PurgeRetention: 30 * time.Millisecond, PurgeBatchSize: 7}, "node", behave)
		s.register(ob, bulkEvent, "node", behave)
		if err := ob.Start(t.Context()); err != nil {
			t.Fatal(err)
		}

		type replayed struct {
			ok     bool      // Replay returned nil
			purged time.Time // when Replay found no row
		}
		var (
			mu      sync.Mutex
			byID    = map[string]replayed{}
			bulkN   atomic.Int64 // ReplayAll's total
			errs    []error
			replays atomic.Int64
		)
		fail := func(err error) {
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, err)
		}
		// The writers run for the tier's duration, and on (at most a minute more) until
		// the run has shown what it checks: a replay that succeeded and a row purged
		// while DEAD. On a loaded machine 2 s of writers committed 35 events, and the
		// purger won every race.
		dur := Duration(t, 2*time.Second)
		const more = time.Minute
		rctx, rcancel := context.WithTimeout(t.Context(), dur+more+time.Second)
		defer rcancel()
		var stop atomic.Bool // the writers are done: the replayers finish
		var wg sync.WaitGroup
		wg.Go(func() { // one by one
			dead := ob.Events()
			for rctx.Err() == nil && !stop.Load() {
				page, err := dead.ListDead(rctx, outbox.DeadQuery{DeadFilter: outbox.DeadFilter{EventType: chaosEvent}, Limit: 20})
				if err != nil {
					// A dial or read cut short by rctx's deadline can fail a moment before
					// rctx reports it ("dial tcp …: i/o timeout"): an error that close to
					// the deadline is the deadline.
					if dl, _ := rctx.Deadline(); rctx.Err() == nil && time.Until(dl) > 100*time.Millisecond {
						fail(fmt.Errorf("list: %w", err))
					}
					return
				}
				for _, e := range page.Events {
					sleepCtx(rctx, time.Duration(chance(seed, e.ID, "wait")*float64(40*time.Millisecond)))
					err := dead.Replay(context.WithoutCancel(rctx), e.ID)
					replays.Add(1)
					mu.Lock()
					switch {
					case err == nil:
						byID[e.ID] = replayed{ok: true}
					case errors.Is(err, outbox.ErrNotFound):
						byID[e.ID] = replayed{purged: time.Now()}
					case errors.Is(err, outbox.ErrNotDead):
					default:
						errs = append(errs, fmt.Errorf("replay %s: %w", e.ID, err))
					}
					mu.Unlock()
				}
				sleepCtx(rctx, 5*time.Millisecond)
			}
		})
		wg.Go(func() { // by filter
			dead := ob.Events()
			for rctx.Err() == nil && !stop.Load() {
				n, err := dead.ReplayAll(context.WithoutCancel(rctx), outbox.DeadFilter{AggregateType: chaosAggregate, EventType: bulkEvent}, 3)
				bulkN.Add(n)
				if err != nil {
					fail(fmt.Errorf("replay all: %w", err))
					return
				}
				sleepCtx(rctx, 30*time.Millisecond)
			}
		})
		shown := func() bool {
			mu.Lock()
			defer mu.Unlock()
			ok, purged := bulkN.Load() > 0, false
			for _, rp := range byID {
				ok, purged = ok || rp.ok, purged || !rp.purged.IsZero()
			}
			return ok && purged
		}
		began := time.Now()
		for round := 0; ; round++ {
			var lw sync.WaitGroup
			lw.Go(func() {
				s.load(t.Context(), ob.Writer(), loadOptions{writers: 2, duration: dur, pause: 5 * time.Millisecond,
					prefix: fmt.Sprintf("r%d-", round)}).assertNoTxErrors(t)
			})
			lw.Go(func() {
				s.load(t.Context(), ob.Writer(), loadOptions{writers: 1, duration: dur, pause: 10 * time.Millisecond,
					prefix: fmt.Sprintf("bulk-r%d-", round),
					envelope: func(id string) outbox.Envelope {
						e := envelope(id)
						e.Type = bulkEvent
						return e
					}}).assertNoTxErrors(t)
			})
			lw.Wait()
			if shown() || time.Since(began) > more {
				break
			}
		}
		stop.Store(true)
		wg.Wait()
		for _, err := range errs {
			t.Errorf("replayer: %v", err)
		}
		s.drain(30 * time.Second)
		if err := ob.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}

		// Rows purged while DEAD are gone legitimately: tell the checker, except for
		// events whose replay succeeded (those must have been delivered).
		recs := s.records()
		finals := s.finals()
		delivered := map[string]int{}
		startedAt := map[string]time.Time{}
		for _, r := range recs {
			switch r.Kind {
			case Delivered:
				delivered[r.Event]++
			case Started:
				startedAt[r.Event] = r.At
			}
		}
		var extra []Final
		bulkDelivered := 0
		purgedDead := 0
		for _, r := range recs {
			if r.Kind != Committed {
				continue
			}
			id := r.Event
			isBulk := strings.HasPrefix(id, "bulk-")
			if isBulk && diesFirst(id) && delivered[id] > 0 {
				bulkDelivered++
			}
			_, exists := finals[id]
			rp := byID[id]
			if !exists && delivered[id] == 0 && diesFirst(id) && !rp.ok {
				extra = append(extra, Final{Event: id, Status: int(outbox.StatusDead), Attempts: 1})
				purgedDead++
			}
			if !rp.purged.IsZero() {
				if exists {
					t.Errorf("%s: purged (replay found no row), but it has a row again", id)
				}
				if startedAt[id].After(rp.purged) {
					t.Errorf("%s: purged, but delivered afterwards", id)
				}
			}
			if diesFirst(id) && !isBulk && delivered[id] > 0 && !rp.ok {
				var hist []string
				for _, r := range recs {
					if r.Event == id {
						hist = append(hist, fmt.Sprintf("%s %s@%s", r.Kind, r.Node, r.At.Format("15:04:05.000000")))
					}
				}
				t.Errorf("%s: delivered after it died, without a successful replay (replay %+v): %s", id, rp, strings.Join(hist, ", "))
			}
		}
		if got := int64(bulkDelivered); got != bulkN.Load() {
			t.Errorf("ReplayAll replayed %d events, %d of them delivered", bulkN.Load(), got)
		}
		s.check(true, extra...)
		t.Logf("%d replays by ID, %d by filter, %d rows purged while DEAD, %d rows left", replays.Load(), bulkN.Load(), purgedDead, len(finals))
		okReplays := 0
		for _, rp := range byID {
			if rp.ok {
				okReplays++
			}
		}
		if okReplays+int(bulkN.Load()) == 0 || purgedDead == 0 {
			t.Errorf("%d replays succeeded, %d rows purged while DEAD: the run proved nothing", okReplays+int(bulkN.Load()), purgedDead)
		}
		s.assertNoErrorLogs("event moved to dead")
	})
}
