package outboxcmd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
)

// pauseJSON is the JSON of pause and resume.
type pauseJSON struct {
	Action   string `json:"action"`
	Listener string `json:"listener"`
	Reason   string `json:"reason"`
	Error    string `json:"error"`
}

// pausedJSON is the JSON of paused.
type pausedJSON struct {
	Paused []struct {
		Listener string    `json:"listener"`
		At       time.Time `json:"at"`
		Actor    string    `json:"actor"`
		Reason   string    `json:"reason"`
	} `json:"paused"`
}

// TestPause: pause holds a subscription's events pending in a running outbox on the
// same table (the command registers no listener: another process runs the
// subscription), paused lists it with since when, who and why, and resume delivers the
// held event; a name no process runs can be paused too; each change is audited with its
// actor, on each database.
func TestPause(t *testing.T) {
	t.Parallel()
	forEachDatabase(t, func(t *testing.T, tg target) {
		tg.ok(t, "migrate")
		if out := tg.ok(t, "paused"); !hasFields(out, "SUBSCRIPTION", "SINCE", "ACTOR", "REASON") || strings.Count(out, "\n") != 1 {
			t.Fatalf("paused with nothing paused:\n%s", out)
		}

		// The process that runs the subscription "Order/OrderPlaced".
		var delivered atomic.Int64
		ob, err := outbox.New(tg.db, outbox.Config{Dialect: tg.dialect, Table: tg.table, Workers: 1, PollInterval: 50 * time.Millisecond,
			SkipRecent: -1, PurgeInterval: -1, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		err = ob.Register("Order", "OrderPlaced", outbox.ListenerFunc(func(context.Context, *outbox.Event) error {
			delivered.Add(1)
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		if err := ob.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := ob.Stop(ctx); err != nil {
				t.Errorf("stop: %v", err)
			}
		})
		const placed = "Order/OrderPlaced"
		held := func(want bool) {
			t.Helper()
			eventually(t, fmt.Sprintf("the running outbox sees %s paused=%v", placed, want), func() bool {
				loads, err := ob.Events().Subscriptions(t.Context())
				return err == nil && len(loads) == 1 && loads[0].Paused == want
			})
		}

		// The name after or before -reason; -actor, then $OUTBOX_ACTOR.
		before := time.Now().Add(-time.Minute)
		if out := tg.ok(t, "-actor", "alice", "pause", placed, "-reason", "inventory\nis down"); out != "paused "+placed+"\n" {
			t.Fatalf("pause: %q", out)
		}
		if out, errOut, code := tg.command(t, runOpts{env: []string{"OUTBOX_ACTOR=bob"}}, "pause", "-reason", "nightly", "reports/Nightly"); code != 0 ||
			out != "paused reports/Nightly\n" {
			t.Fatalf("pause of a subscription no process runs: exit %d\n%s%s", code, out, errOut)
		}
		held(true)
		id := outbox.NewID()
		err = outbox.RunInTx(t.Context(), tg.db, func(ctx context.Context, tx *outbox.Tx) error {
			_, err := ob.Writer().Write(ctx, tx, outbox.Envelope{ID: id, Type: "OrderPlaced", AggregateType: "Order", Payload: json.RawMessage(`{}`)})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := outboxtest.Poll(t.Context(), ob); err != nil {
			t.Fatal(err)
		}
		if e, err := ob.Events().Get(t.Context(), id); err != nil || e.Status != outbox.StatusNew || delivered.Load() != 0 {
			t.Fatalf("an event of the paused subscription: %v, %v, %d deliveries; want NEW, none", e.Status, err, delivered.Load())
		}

		out := tg.ok(t, "paused")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[1], placed+" ") || !strings.HasSuffix(lines[1], ` alice  "inventory\nis down"`) ||
			!strings.HasPrefix(lines[2], "reports/Nightly ") || !strings.HasSuffix(lines[2], " bob    nightly") {
			t.Fatalf("paused:\n%s", out)
		}
		var list pausedJSON
		decode(t, tg.ok(t, "-json", "paused"), &list)
		if len(list.Paused) != 2 || list.Paused[0].Listener != placed || list.Paused[0].Actor != "alice" ||
			list.Paused[0].Reason != "inventory\nis down" || list.Paused[0].At.Before(before) || list.Paused[1].Listener != "reports/Nightly" {
			t.Fatalf("paused -json: %+v", list)
		}

		var res pauseJSON
		decode(t, tg.ok(t, "-json", "resume", placed), &res)
		if res != (pauseJSON{Action: "resume", Listener: placed}) {
			t.Fatalf("resume -json: %+v", res)
		}
		held(false)
		eventually(t, "the held event delivered after the resume", func() bool {
			e, err := ob.Events().Get(t.Context(), id)
			return err == nil && e.Status == outbox.StatusDone
		})
		if n := delivered.Load(); n != 1 {
			t.Errorf("%d deliveries of the held event, want 1", n)
		}
		if out := tg.ok(t, "resume", "reports/Nightly"); out != "resumed reports/Nightly\n" {
			t.Fatalf("resume: %q", out)
		}
		decode(t, tg.ok(t, "-json", "paused"), &list)
		if len(list.Paused) != 0 {
			t.Fatalf("paused after the resumes: %+v", list)
		}

		u, err := user.Current()
		if err != nil {
			t.Fatal(err)
		}
		host, err := os.Hostname()
		if err != nil {
			t.Fatal(err)
		}
		me := "cli:" + u.Username + "@" + host
		var page auditJSON
		decode(t, tg.ok(t, "-json", "audit"), &page)
		want := me + " resume reports/Nightly 1\n" + me + " resume " + placed + " 1\nbob pause reports/Nightly 1\nalice pause " + placed + " 1\n"
		if got := page.entries(); got != want {
			t.Fatalf("audit:\n%swant\n%s", got, want)
		}
	})
}

// eventually waits for cond, failing the test after 60 s: it waits for work on a real
// database and a running outbox, not a timing assertion.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
