package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

// fastRetry keeps retries of the listener scenarios within their short runs.
var fastRetry = outbox.ExponentialBackoff{Base: 20 * time.Millisecond, Max: 200 * time.Millisecond}

// attemptCounter counts each event's attempts in the listener.
type attemptCounter struct {
	mu sync.Mutex
	n  map[string]int
}

// next returns the number of this attempt of id, from 1.
func (c *attemptCounter) next(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[id]++
	return c.n[id]
}

// TestInprocListenerPanic: a listener that panics on the first one or two attempts of
// about a third of the events. Every panic is recovered by the dispatcher and counted
// as a failed attempt; the event is retried and delivered exactly once; no panic
// escapes (the test process would die).
func TestInprocListenerPanic(t *testing.T) {
	seed := Seed(t)
	forEachBackend(t, allBackends, func(t *testing.T, be backend) {
		s := newScene(t, "listener-panic", be, seed, sceneOptions{})
		var attempts attemptCounter
		panics := func(id string) int { // panicking attempts of id
			switch c := chance(seed, id, "panic"); {
			case c < 0.2:
				return 1
			case c < 0.33:
				return 2
			}
			return 0
		}
		ob := s.start(outbox.Config{Workers: 4, PollInterval: 100 * time.Millisecond, Retry: fastRetry, MaxAttempts: 5}, "node",
			func(ctx context.Context, e *outbox.Event) error {
				if attempts.next(e.ID) <= panics(e.ID) {
					s.faults.Add(1)
					panic(fmt.Sprintf("chaos: listener panic on %s", e.ID))
				}
				return nil
			})
		res := s.load(t.Context(), ob.Writer(), loadOptions{writers: 4, duration: Duration(t, shortLoad), batch: 2, pause: 5 * time.Millisecond})
		res.assertNoTxErrors(t)
		s.drain(30 * time.Second)
		rep := s.check(true)

		finals := s.finals()
		wantPanics := 0
		for id, f := range finals {
			p := panics(id)
			wantPanics += p
			if outbox.Status(f.Status) != outbox.StatusDone || f.Attempts != p {
				t.Errorf("%s: status %v attempts %d, want DONE after %d failed attempt(s)", id, outbox.Status(f.Status), f.Attempts, p)
			}
		}
		if got := s.logs.count("listener panicked"); got != wantPanics || wantPanics == 0 {
			t.Errorf("logged %d recovered panics, want %d (> 0)", got, wantPanics)
		}
		s.assertNoErrorLogs("listener panicked")
		t.Logf("%d events, %d panics recovered, %d delivered", len(finals), wantPanics, rep.Delivered)
	})
}

// TestInprocListenerHang: listeners that hang past ListenerTimeout on their first
// attempt, in three ways: one waits for its context and returns its error, one ignores
// the context and fails late, one ignores it and succeeds late. The first two are
// retried and delivered once; the third counts as delivered (DONE, never retried).
// Attempts of one event never overlap, and the other events keep flowing meanwhile.
func TestInprocListenerHang(t *testing.T) {
	seed := Seed(t)
	const timeout = 250 * time.Millisecond
	forEachBackend(t, allBackends, func(t *testing.T, be backend) {
		s := newScene(t, "listener-hang", be, seed, sceneOptions{})
		var attempts attemptCounter
		// The first events of writer 0 hang each way, then one event in 200 each way:
		// few enough that the 8 workers are never all held up, which would delay the
		// others by capacity, not by the hangs.
		hang := func(id string) string {
			switch id {
			case "w0-00000-0":
				return "ctx"
			case "w0-00001-0":
				return "ignore-fail"
			case "w0-00002-0":
				return "ignore-succeed"
			}
			switch c := chance(seed, id, "hang"); {
			case c < 0.005:
				return "ctx"
			case c < 0.01:
				return "ignore-fail"
			case c < 0.015:
				return "ignore-succeed"
			}
			return ""
		}
		ob := s.start(outbox.Config{Workers: 8, PollInterval: 100 * time.Millisecond, Retry: fastRetry, ListenerTimeout: timeout}, "node",
			func(ctx context.Context, e *outbox.Event) error {
				if attempts.next(e.ID) > 1 {
					return nil
				}
				switch hang(e.ID) {
				case "ctx":
					s.faults.Add(1)
					<-ctx.Done()
					return ctx.Err()
				case "ignore-fail":
					s.faults.Add(1)
					time.Sleep(timeout + 100*time.Millisecond)
					return errors.New("chaos: finished after the timeout")
				case "ignore-succeed":
					s.faults.Add(1)
					time.Sleep(timeout + 100*time.Millisecond)
					return nil
				}
				return nil
			})
		res := s.load(t.Context(), ob.Writer(), loadOptions{writers: 4, duration: Duration(t, shortLoad), pause: 10 * time.Millisecond})
		res.assertNoTxErrors(t)
		s.drain(30 * time.Second)
		s.check(true)

		latencies := deliveryLatencies(s.records(), func(id string) bool { return hang(id) == "" })
		hung := 0
		for id, f := range s.finals() {
			want := 0
			switch hang(id) {
			case "ctx", "ignore-fail":
				want, hung = 1, hung+1
			case "ignore-succeed":
				hung++
			}
			if outbox.Status(f.Status) != outbox.StatusDone || f.Attempts != want {
				t.Errorf("%s (%q): status %v attempts %d, want DONE after %d failed attempt(s)", id, hang(id), outbox.Status(f.Status), f.Attempts, want)
			}
		}
		p99 := percentile(latencies, 0.99)
		t.Logf("%d hung attempts; latency of the other events: p50 %s p99 %s max %s", hung, percentile(latencies, 0.5), p99, percentile(latencies, 1))
		if hung == 0 {
			t.Error("no listener hung: the run proved nothing")
		}
		// With 8 workers and a few hanging at a time, the others are never held up
		// for a whole timeout.
		if p99 > 2*time.Second {
			t.Errorf("p99 latency of events that did not hang is %s: hung listeners held the others up", p99)
		}
		s.assertNoErrorLogs()
	})
}

// TestInprocPoisonEvent: poison events that always fail (an error, a panic) go DEAD
// after MaxAttempts, one marked unrecoverable goes DEAD at once, and the events written
// around them are delivered without waiting for them.
func TestInprocPoisonEvent(t *testing.T) {
	seed := Seed(t)
	const maxAttempts = 4
	forEachBackend(t, allBackends, func(t *testing.T, be backend) {
		s := newScene(t, "poison-event", be, seed, sceneOptions{deadOK: true})
		poison := func(id string) string {
			if !strings.HasPrefix(id, "poison-") {
				return ""
			}
			switch c := chance(seed, id, "poison"); {
			case c < 0.4:
				return "error"
			case c < 0.8:
				return "panic"
			}
			return "unrecoverable"
		}
		ob := s.start(outbox.Config{Workers: 4, PollInterval: 50 * time.Millisecond, Retry: fastRetry, MaxAttempts: maxAttempts}, "node",
			func(ctx context.Context, e *outbox.Event) error {
				kind := poison(e.ID)
				if kind != "" {
					s.faults.Add(1) // a failed attempt
				}
				switch kind {
				case "error":
					return errors.New("chaos: poison")
				case "panic":
					panic("chaos: poison")
				case "unrecoverable":
					return fmt.Errorf("chaos: poison: %w", outbox.ErrUnrecoverable)
				}
				return nil
			})
		ctx := t.Context()
		var wg sync.WaitGroup
		wg.Go(func() { // poison, a few per second
			res := s.load(ctx, ob.Writer(), loadOptions{writers: 1, duration: Duration(t, shortLoad), pause: 100 * time.Millisecond, prefix: "poison-"})
			res.assertNoTxErrors(t)
		})
		res := s.load(ctx, ob.Writer(), loadOptions{writers: 4, duration: Duration(t, shortLoad), pause: 5 * time.Millisecond})
		res.assertNoTxErrors(t)
		wg.Wait()
		s.drain(30 * time.Second)
		rep := s.check(true)

		latencies := deliveryLatencies(s.records(), func(id string) bool { return poison(id) == "" })
		npoison := 0
		for id, f := range s.finals() {
			kind := poison(id)
			want, wantStatus := 0, outbox.StatusDone
			switch kind {
			case "error", "panic":
				want, wantStatus = maxAttempts, outbox.StatusDead
			case "unrecoverable":
				want, wantStatus = 1, outbox.StatusDead
			}
			if kind != "" {
				npoison++
			}
			if outbox.Status(f.Status) != wantStatus || f.Attempts != want {
				t.Errorf("%s (%q): %v after %d attempts, want %v after %d", id, kind, outbox.Status(f.Status), f.Attempts, wantStatus, want)
			}
		}
		if npoison == 0 || rep.Dead != npoison {
			t.Errorf("%d poison events, %d DEAD", npoison, rep.Dead)
		}
		p99 := percentile(latencies, 0.99)
		t.Logf("%d poison events DEAD; latency of the others: p50 %s p99 %s max %s", npoison, percentile(latencies, 0.5), p99, percentile(latencies, 1))
		// Healthy events do not wait for the poison retries, counted, not timed: a
		// healthy event committed before a retried poison event was committed is due
		// before that poison event's first retry (its row is older, and every retry
		// waits a backoff), so it must be delivered before the poison event's last
		// attempt starts, maxAttempts − 1 backoffs later. One delivered after it waited
		// behind the poison retries.
		if waited, pairs := waitedForPoison(s.records(), func(id string) string { return poison(id) }); pairs == 0 {
			t.Errorf("no healthy event was committed before a retried poison event: the run proved nothing")
		} else if len(waited) > 0 {
			t.Errorf("%d healthy event(s) delivered only after the last attempt of a poison event committed after them: %s",
				len(waited), abbrev(waited))
		}
		// The long tier keeps the stricter timed check (it runs on a quiet machine).
		if Long() && p99 > 2*time.Second {
			t.Errorf("p99 latency of healthy events is %s: poison events delayed them", p99)
		}
		s.assertNoErrorLogs("listener panicked", "event moved to dead")
	})
}

// waitedForPoison returns the healthy events (kind "") delivered after the last attempt
// of a retried poison event (kind "error" or "panic") committed after them, and how many
// healthy events were committed before some retried poison event (the property's cases).
func waitedForPoison(recs []Record, kind func(id string) string) (waited []string, cases int) {
	committed := map[string]time.Time{}
	delivered := map[string]time.Time{}
	lastStart := map[string]time.Time{}
	for _, r := range recs {
		switch r.Kind {
		case Committed:
			committed[r.Event] = r.At
		case Delivered:
			if _, ok := delivered[r.Event]; !ok {
				delivered[r.Event] = r.At
			}
		case Started:
			if k := kind(r.Event); k == "error" || k == "panic" {
				lastStart[r.Event] = maxTime(lastStart[r.Event], r.At)
			}
		}
	}
	type poisoned struct{ committed, last time.Time }
	var ps []poisoned
	for id, last := range lastStart {
		if at, ok := committed[id]; ok {
			ps = append(ps, poisoned{at, last})
		}
	}
	for id, at := range committed {
		if kind(id) != "" {
			continue
		}
		d, ok := delivered[id]
		counted := false
		for _, p := range ps {
			if !at.Before(p.committed) {
				continue
			}
			if !counted {
				cases++
				counted = true
			}
			if !ok || d.After(p.last) {
				waited = append(waited, id)
				break
			}
		}
	}
	slices.Sort(waited)
	return waited, cases
}

// deliveryLatencies returns, for each delivery of an event that keep selects, the time
// from its writer's Committed record to the delivery (0 when the hot path delivered it
// before the writer recorded the commit).
func deliveryLatencies(recs []Record, keep func(id string) bool) []time.Duration {
	committed := map[string]time.Time{}
	for _, r := range recs {
		if r.Kind == Committed {
			committed[r.Event] = r.At
		}
	}
	var out []time.Duration
	for _, r := range recs {
		if at, ok := committed[r.Event]; ok && r.Kind == Delivered && keep(r.Event) {
			out = append(out, max(r.At.Sub(at), 0))
		}
	}
	return out
}

// percentile returns the q-quantile of ds (q = 1: the maximum), 0 when empty.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q * float64(len(s)-1))
	return s[i]
}
