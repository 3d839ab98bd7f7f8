package admintest

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/internal/testdb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(exitCode int) {
		testdb.StopAll()
		os.Exit(exitCode)
	}))
}

// TestFixture checks the fixture the suite relies on: seeded events die with their
// reason, and after Fix a replayed event is delivered once.
func TestFixture(t *testing.T) {
	t.Parallel()
	fx := NewFixture(t, FixtureOptions{})
	ids := fx.SeedDead(t, Seed{Reason: "boom"}, Seed{})
	for i, want := range []string{"boom", DefaultReason} {
		e, err := fx.Outbox.Events().Get(t.Context(), ids[i])
		if err != nil || e.Status != outbox.StatusDead || e.LastError != want {
			t.Fatalf("seeded event %d = %+v, %v; want DEAD with %q", i, e, err, want)
		}
	}
	fx.Fix()
	if err := fx.Outbox.Events().Replay(t.Context(), ids[0]); err != nil {
		t.Fatal(err)
	}
	fx.Poll(t)
	fx.WaitStatus(t, outbox.StatusDone, ids[0])
	if n := fx.Deliveries(ids[0]); n != 1 {
		t.Errorf("%d deliveries, want 1", n)
	}
}

// TestServeMuxMountsUnderPrefix checks the mount helper the admin tests use.
func TestServeMuxMountsUnderPrefix(t *testing.T) {
	t.Parallel()
	fx := NewFixture(t, FixtureOptions{})
	e := mountHandler(t, ServeMux("/outbox/admin"), fx, fx.Outbox.Events(), nil)
	if u := mustParse(t, e.base); u.Path != "/outbox/admin/" {
		t.Fatalf("base %s", e.base)
	}
	var o overviewBody
	e.c.get(t, "api/overview").decode(t, 200, &o)
}
