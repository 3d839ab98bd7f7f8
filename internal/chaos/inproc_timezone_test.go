package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/internal/testdb"
)

// envTZChild marks the child process of TestInprocTimeZoneProcess.
const envTZChild = "OUTBOX_CHAOS_TZ_CHILD"

// processZones are the process time zones the child runs in: half-hour offsets on both
// sides of UTC (St John's also has daylight saving time).
var processZones = []string{"Asia/Kolkata", "America/St_Johns"}

// TestInprocTimeZoneProcess runs the delayed-event scenario in a child process (this
// test binary) started with TZ set to a zone with a half-hour offset, so that time.Local,
// and every time.Now the application and the library take, is not UTC. The databases'
// DSNs are handed to the child.
func TestInprocTimeZoneProcess(t *testing.T) {
	if os.Getenv(envTZChild) != "" {
		t.Skip("in the child")
	}
	pg, my := testdb.PostgresDSN(t), testdb.MySQLDSN(t)
	for _, zone := range processZones {
		t.Run(strings.ReplaceAll(zone, "/", "_"), func(t *testing.T) {
			t.Parallel()
			args := []string{"-test.run=^TestInprocTimeZoneChild$", "-test.v", "-test.count=1", "-test.timeout=10m"}
			cmd := exec.CommandContext(t.Context(), os.Args[0], args...)
			cmd.Env = append(os.Environ(), "TZ="+zone, envTZChild+"="+zone,
				testdb.EnvPostgresDSN+"="+pg, testdb.EnvMySQLDSN+"="+my)
			cmd.WaitDelay = 10 * time.Second
			out, err := cmd.CombinedOutput()
			for _, line := range strings.Split(string(out), "\n") {
				if strings.Contains(line, "_test.go:") || strings.HasPrefix(strings.TrimSpace(line), "--- ") {
					t.Log(strings.TrimRight(line, " "))
				}
			}
			if err != nil {
				t.Errorf("child in TZ=%s: %v\n%s", zone, err, out)
			}
		})
	}
}

// TestInprocTimeZoneChild is the child of TestInprocTimeZoneProcess.
func TestInprocTimeZoneChild(t *testing.T) {
	zone := os.Getenv(envTZChild)
	if zone == "" {
		t.Skip("run by TestInprocTimeZoneProcess in a child process")
	}
	if name, off := time.Now().Zone(); off == 0 || time.Local.String() != zone {
		t.Fatalf("time.Local is %s (%s, offset %d), want %s", time.Local, name, off, zone)
	}
	seed := Seed(t)
	for _, mode := range queueModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			forEachBackend(t, allBackends, func(t *testing.T, be backend) {
				s := newScene(t, fmt.Sprintf("timezone-process(%s)/%s", zone, mode.name), be, seed, sceneOptions{})
				delayedEvents(t, s, mode.cfg)
			})
		})
	}
}

// TestInprocTimeZoneSession runs the delayed-event scenario over connections whose
// database session time zone is not UTC: PostgreSQL in Pacific/Chatham (+12:45 or
// +13:45), MariaDB at +05:45. SQLite has no session time zone.
func TestInprocTimeZoneSession(t *testing.T) {
	seed := Seed(t)
	sessions := map[string]string{
		"postgres": "&timezone=Pacific%2FChatham",
		"mysql":    "&time_zone=%27%2B05%3A45%27",
	}
	for _, mode := range queueModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			forEachBackend(t, []backend{postgresBackend, mysqlBackend}, func(t *testing.T, be backend) {
				s := newScene(t, "timezone-session/"+mode.name, be, seed, sceneOptions{dsnExtra: sessions[be.name]})
				var zone string
				q := "SELECT current_setting('TimeZone')"
				if be.name == "mysql" {
					q = "SELECT @@session.time_zone"
				}
				if err := s.db.QueryRowContext(t.Context(), q).Scan(&zone); err != nil {
					t.Fatal(err)
				}
				if zone != "Pacific/Chatham" && zone != "+05:45" {
					t.Fatalf("session time zone is %q", zone)
				}
				delayedEvents(t, s, mode.cfg)
			})
		})
	}
}

// delayedEvents writes events delayed by 0.3 to 1.5 s (by DeliverAfter, or by an
// AvailableAt and OccurredAt given in the process's local zone) and checks that each
// is delivered with the times it was written with (due from the write instead when the
// write, on a busy machine, ran past the AvailableAt), not before its AvailableAt and
// not long after, and that every event is delivered once.
func delayedEvents(t *testing.T, s *scene, cfg outbox.Config) {
	const (
		early = 5 * time.Millisecond // the clocks are the host's; allow rounding only
		// A zone misread shifts an event by the zone's offset, hours for
		// every zone here, so a bound far below that and at the drain's (30 s) catches
		// it; how soon after its time an event is delivered otherwise is the machine's
		// speed under load (3 s failed at load 25 on 2 cores). That an idle poller
		// wakes at a due time is TestDelayedEventWakesIdlePoller's (internal/roottest/core).
		late = 30 * time.Second
	)
	// want is what an event was written with: exact times, or (DeliverAfter) a delay
	// counted from a write time between lo and hi.
	type want struct {
		created, available time.Time
		delay              time.Duration
		lo, hi             time.Time
	}
	var (
		mu      sync.Mutex
		wants   = map[string]*want{}
		badTime []string
		earlyN  int
		lateMax time.Duration
	)
	cfg.PollInterval, cfg.SkipRecent = 100*time.Millisecond, 200*time.Millisecond
	ob := s.start(cfg, "node", func(ctx context.Context, e *outbox.Event) error {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		w, ok := wants[e.ID]
		switch {
		case !ok:
			badTime = append(badTime, e.ID+": not written by this test")
		case e.AvailableAt.Location() != time.UTC || e.CreatedAt.Location() != time.UTC:
			badTime = append(badTime, fmt.Sprintf("%s: times in %s and %s", e.ID, e.CreatedAt.Location(), e.AvailableAt.Location()))
		case w.delay == 0 && (!e.CreatedAt.Equal(w.created) || !dueAsWritten(e.AvailableAt, w.available, w.lo, w.hi, now)):
			// Attempts and LastError say whether a failed attempt moved the due time (a retry).
			badTime = append(badTime, fmt.Sprintf("%s: created %s available %s, written with %s and %s (attempts %d, last error %q)",
				e.ID, e.CreatedAt, e.AvailableAt, w.created, w.available, e.Attempts, e.LastError))
		case w.delay != 0 && (e.AvailableAt.Sub(e.CreatedAt) != w.delay || e.CreatedAt.Before(w.lo) || !w.hi.IsZero() && e.CreatedAt.After(w.hi)):
			badTime = append(badTime, fmt.Sprintf("%s: created %s available %s, written between %s and %s with a delay of %s (attempts %d, last error %q)",
				e.ID, e.CreatedAt, e.AvailableAt, w.lo, w.hi, w.delay, e.Attempts, e.LastError))
		}
		if d := now.Sub(e.AvailableAt); d < -early {
			earlyN++
			badTime = append(badTime, fmt.Sprintf("%s: delivered %s before its time", e.ID, -d))
		} else if d > lateMax {
			lateMax = d
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), Duration(t, shortLoad))
	defer cancel()
	var wg sync.WaitGroup
	for wi := range 3 {
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				id := fmt.Sprintf("w%d-%05d", wi, n)
				env := envelope(id)
				delay := time.Duration(300+chance(s.seed, id, "delay")*1200) * time.Millisecond
				now := time.Now() // in the local zone
				w := &want{lo: now.UTC().Truncate(time.Microsecond)}
				if n%2 == 0 {
					env.DeliverAfter, w.delay = delay, delay
				} else {
					env.OccurredAt, env.AvailableAt = now.Add(-time.Minute), now.Add(delay)
					w.created, w.available = canonical(env.OccurredAt), canonical(env.AvailableAt)
				}
				mu.Lock()
				wants[id] = w
				mu.Unlock()
				if _, err := s.writeTx(context.WithoutCancel(ctx), s.db, ob.Writer(), txKind(n%2), []outbox.Envelope{env}, false); err != nil {
					t.Errorf("write: %v", err)
				}
				mu.Lock()
				w.hi = time.Now().UTC()
				mu.Unlock()
				sleepCtx(ctx, 20*time.Millisecond)
			}
		})
	}
	wg.Wait()
	s.drain(30 * time.Second)
	s.check(true)
	mu.Lock()
	defer mu.Unlock()
	for _, b := range badTime {
		t.Error(b)
	}
	t.Logf("%d delayed events; none early (%d); latest delivery %s after its time", len(wants), earlyN, lateMax.Round(time.Millisecond))
	if lateMax > late {
		t.Errorf("an event was delivered %s after its time", lateMax)
	}
}

// dueAsWritten reports whether an event written with the due time available, by a
// write that started at lo and returned at hi (zero while it has not), is due at got:
// at available, or, when the write ran past it, at the write's own time (an event is
// due from its write at the earliest), which is after available and between lo and hi
// (or the delivery, now, while hi is not known).
func dueAsWritten(got, available, lo, hi, now time.Time) bool {
	if got.Equal(available) {
		return true
	}
	if hi.IsZero() {
		hi = now
	}
	return got.After(available) && !got.Before(lo) && !got.After(hi)
}

// canonical is how the library stores a time: UTC, whole microseconds.
func canonical(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }
