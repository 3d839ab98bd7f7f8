package outbox_test

// Unit tests of the claim machinery on the in-memory store: node IDs and tokens, the
// writer's pre-claim, the dispatcher's renewal of short claims and the claiming poller.
// The same machinery on real databases is in multinode_test.go.

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
	"github.com/outboxkit/outbox/core/storage"
)

func TestValidateNodeID(t *testing.T) {
	t.Parallel()
	for id, ok := range map[string]bool{
		"node-1": true, "web-7f9c.prod:8080": true, strings.Repeat("n", outbox.MaxNodeIDLen): true,
		"": false, "a/b": false, "a b": false, "tab\t": false, "ünï": false, "\x7f": false,
		strings.Repeat("n", outbox.MaxNodeIDLen+1): false,
	} {
		err := outbox.ValidateNodeID(id)
		var ce *outbox.ConfigError
		switch {
		case ok && err != nil:
			t.Errorf("ValidateNodeID(%q) = %v, want nil", id, err)
		case !ok && (!errors.As(err, &ce) || ce.Field != "NodeID"):
			t.Errorf("ValidateNodeID(%q) = %v, want a ConfigError on NodeID", id, err)
		}
	}
}

func TestDefaultNodeIDAndTokens(t *testing.T) {
	t.Parallel()
	a, b := outbox.DefaultNodeID(), outbox.DefaultNodeID()
	if a == b {
		t.Fatalf("two default node IDs are equal: %q", a)
	}
	for _, id := range []string{a, b} {
		if err := outbox.ValidateNodeID(id); err != nil {
			t.Fatalf("DefaultNodeID() = %q: %v", id, err)
		}
		if !strings.Contains(id, "-"+strconv.Itoa(os.Getpid())+"-") {
			t.Fatalf("DefaultNodeID() = %q lacks the process ID", id)
		}
	}
	t1, t2 := outbox.NewClaimToken(a), outbox.NewClaimToken(a)
	if t1 == t2 || !strings.HasPrefix(t1, a+"/") || len(t1) > outbox.MaxClaimTokenLen {
		t.Fatalf("tokens %q, %q", t1, t2)
	}
	if got := outbox.ClaimOwner(t1); got != a {
		t.Fatalf("ClaimOwner(%q) = %q, want %q", t1, got, a)
	}
	if got := outbox.ClaimOwner("plain"); got != "plain" {
		t.Fatalf("ClaimOwner(plain) = %q", got)
	}
	long := outbox.NewClaimToken(strings.Repeat("n", outbox.MaxNodeIDLen))
	if len(long) > outbox.MaxClaimTokenLen {
		t.Fatalf("a token of the longest node ID is %d bytes", len(long))
	}
}

// paramsRecorder records the params of every Insert into a MemoryStore.
type paramsRecorder struct {
	*outboxtest.MemoryStore
	mu     sync.Mutex
	params []storage.InsertParams
}

func (r *paramsRecorder) Insert(ctx context.Context, exec outbox.Executor, p storage.InsertParams) (storage.InsertResult, error) {
	r.mu.Lock()
	r.params = append(r.params, p)
	r.mu.Unlock()
	return r.MemoryStore.Insert(ctx, exec, p)
}

func (r *paramsRecorder) last() storage.InsertParams {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.params[len(r.params)-1]
}

func TestWriterPreClaimsHotPathEvents(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store := &paramsRecorder{MemoryStore: outboxtest.NewMemoryStore()}
	w := newWriter(t, store, outbox.WriterConfig{ClaimTTL: time.Minute, NodeID: "node-1",
		Hooks: []outbox.WriterHook{outbox.NopWriterHook{}}})
	envs := []outbox.Envelope{
		{Type: "T", Payload: 1}, {Type: "T", Payload: 2},
		{Type: "T", Payload: 3, DeliverAfter: time.Hour}, // delayed: left to the pollers
	}
	before := time.Now()
	ids, err := w.WriteAll(ctx, &hookedTx{}, envs)
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	p := store.last()
	if p.ClaimTTL != time.Minute {
		t.Fatalf("ClaimTTL %s, want 1m", p.ClaimTTL)
	}
	tok := p.Events[0].LockedBy
	if outbox.ClaimOwner(tok) != "node-1" || p.Events[1].LockedBy != tok || p.Events[2].LockedBy != "" {
		t.Fatalf("tokens %q %q %q: want one node-1 token for the due events, none for the delayed one",
			tok, p.Events[1].LockedBy, p.Events[2].LockedBy)
	}
	if lu := p.Events[0].LockedUntil; lu.Before(before.Add(time.Minute)) || lu.After(after.Add(time.Minute)) {
		t.Fatalf("LockedUntil %v, want the write time plus the TTL", lu)
	}
	row, _ := store.Event(ids[0])
	if row.LockedBy != tok || row.LockedUntil.Before(before.Add(time.Minute-time.Second)) {
		t.Fatalf("stored claim %q until %v", row.LockedBy, row.LockedUntil)
	}
	// Every batch gets a fresh token.
	if _, err := w.Write(ctx, &hookedTx{}, envs[0]); err != nil {
		t.Fatal(err)
	}
	if next := store.last().Events[0].LockedBy; next == tok || outbox.ClaimOwner(next) != "node-1" {
		t.Fatalf("second batch token %q (first %q)", next, tok)
	}
	// A transaction without after-commit hooks has no hot path: nothing is claimed.
	if _, err := w.Write(ctx, fakeTx{}, envs[0]); err != nil {
		t.Fatal(err)
	}
	if p := store.last(); p.ClaimTTL != 0 || p.Events[0].LockedBy != "" {
		t.Fatalf("write through a bare transaction claimed %q for %s", p.Events[0].LockedBy, p.ClaimTTL)
	}
	// Without ClaimTTL nothing is ever claimed.
	plain := newWriter(t, store, outbox.WriterConfig{Hooks: []outbox.WriterHook{outbox.NopWriterHook{}}})
	if _, err := plain.Write(ctx, &hookedTx{}, envs[0]); err != nil {
		t.Fatal(err)
	}
	if p := store.last(); p.ClaimTTL != 0 || p.Events[0].LockedBy != "" {
		t.Fatalf("writer without ClaimTTL claimed %q", p.Events[0].LockedBy)
	}
}

func TestWriterDoesNotPreClaimForAFullHotQueue(t *testing.T) {
	t.Parallel()
	b := setupDispatcher(t, outbox.DispatcherConfig{Workers: 1, HotQueueSize: 1, ClaimTTL: time.Minute})
	g := newGate()
	b.listen(t, "T", g)
	t.Cleanup(g.open)
	w := newWriter(t, b.store, outbox.WriterConfig{ClaimTTL: time.Minute, NodeID: "n1",
		Hooks: []outbox.WriterHook{b.d.WriterHook()}})
	write := func() string {
		tx := &hookedTx{}
		id, err := w.Write(t.Context(), tx, outbox.Envelope{Type: "T", Payload: 1})
		if err != nil {
			t.Fatal(err)
		}
		tx.Committed()
		return id
	}
	running := write() // taken by the one worker, which blocks
	eventually(t, "first delivery running", func() bool { return len(g.delivered()) == 1 })
	queued := write() // fills the hot queue
	left := write()   // the queue is full: not claimed, left to the pollers
	for id, wantClaimed := range map[string]bool{running: true, queued: true, left: false} {
		if claimed := b.row(t, id).LockedBy != ""; claimed != wantClaimed {
			t.Errorf("%s claimed = %v, want %v", id, claimed, wantClaimed)
		}
	}
	if c := b.metrics.counts(); c.hotEnqueued != 2 || c.hotDropped != 1 {
		t.Fatalf("metrics %+v, want 2 hot enqueued and 1 dropped", c)
	}
}

func TestDispatcherRenewsShortClaims(t *testing.T) {
	t.Parallel()
	const ttl = 10 * time.Second
	b := setupDispatcher(t, outbox.DispatcherConfig{ClaimTTL: ttl, ListenerTimeout: time.Second, StatusTimeout: time.Second})
	rec := newDeliveries(nil)
	b.listen(t, "T", rec)
	claim := func(id string) outbox.Event {
		t.Helper()
		e := newEvent(id, "T")
		e.CreatedAt, e.AvailableAt = e.CreatedAt.Add(-time.Minute), e.AvailableAt.Add(-time.Minute)
		if _, err := b.store.Insert(t.Context(), nil, storage.InsertParams{Events: []outbox.Event{e}}); err != nil {
			t.Fatal(err)
		}
		batch, err := b.store.Claim(t.Context(), storage.ClaimParams{Token: "n1/" + id, TTL: ttl, Limit: 1})
		if err != nil || len(batch.Events) != 1 {
			t.Fatalf("claim %s: %v, %v", id, batch, err)
		}
		got := batch.Events[0]
		got.LockedUntil = time.Now().Add(500 * time.Millisecond) // waited long: less than 2 s left
		return got
	}

	// Still held: renewed, then delivered and recorded under the same token.
	held := claim("held")
	if !b.d.EnqueueCold(held) {
		t.Fatal("EnqueueCold refused")
	}
	eventually(t, "held delivered", func() bool { return b.row(t, "held").Status == outbox.StatusDone })
	if seen := rec.seen(); len(seen) != 1 || time.Until(seen[0].LockedUntil) < ttl/2 {
		t.Fatalf("listener saw %+v; want the renewed claim", seen)
	}

	// Taken over by another node: not delivered.
	lost := claim("lost")
	if _, err := b.store.RenewClaim(t.Context(), storage.RenewClaimParams{ID: "lost", Token: "n1/lost", TTL: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if batch, err := b.store.Claim(t.Context(), storage.ClaimParams{Token: "n2/lost", TTL: ttl, Limit: 1}); err != nil || len(batch.Events) != 1 {
		t.Fatalf("takeover: %v, %v", batch, err)
	}
	b.d.EnqueueCold(lost)
	eventually(t, "lost claim reported", func() bool {
		return len(b.logs.find(slog.LevelWarn, "claim lost before delivery")) == 1
	})
	if rec.of("lost") != 0 || b.row(t, "lost").LockedBy != "n2/lost" {
		t.Fatalf("lost claim delivered %d times; row %+v", rec.of("lost"), b.row(t, "lost"))
	}
	if renewed, lost := b.metrics.claims(outbox.ClaimRenewed), b.metrics.claims(outbox.ClaimLost); renewed != 1 || lost != 1 {
		t.Fatalf("claim metrics: %d renewed, %d lost; want 1 and 1", renewed, lost)
	}
}

func TestDispatcherWithoutClaimTTLSkipsShortClaims(t *testing.T) {
	t.Parallel()
	b := setupDispatcher(t, outbox.DispatcherConfig{ListenerTimeout: time.Second, StatusTimeout: time.Second})
	rec := newDeliveries(nil)
	b.listen(t, "T", rec)
	e := newEvent("short", "T")
	e.LockedBy, e.LockedUntil = "n1/x", time.Now().Add(time.Second)
	if _, err := b.store.Insert(t.Context(), nil, storage.InsertParams{Events: []outbox.Event{e}, ClaimTTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := b.d.WriterHook().AfterCommit(t.Context(), []outbox.Event{e}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "short claim skipped", func() bool {
		return len(b.logs.find(slog.LevelWarn, "claim too close to expiry")) == 1
	})
	if rec.of("short") != 0 {
		t.Fatal("delivered on a claim shorter than an attempt")
	}
	if n := b.metrics.claims(outbox.ClaimExpired); n != 1 {
		t.Fatalf("claims expired = %d, want 1", n)
	}
}

func TestPollerClaimsJustInTime(t *testing.T) {
	t.Parallel()
	b := setupDispatcher(t, outbox.DispatcherConfig{Workers: 1, ClaimTTL: time.Minute})
	g := newGate()
	b.listen(t, "T", g)
	t.Cleanup(g.open)
	var events []outbox.Event
	for i := range 10 {
		e := newEvent("ev-"+strconv.Itoa(i), "T")
		e.CreatedAt = e.CreatedAt.Add(time.Duration(i-60) * time.Second)
		e.AvailableAt = e.CreatedAt
		events = append(events, e)
	}
	if _, err := b.store.Insert(t.Context(), nil, storage.InsertParams{Events: events}); err != nil {
		t.Fatal(err)
	}
	b.store.Corrupt("ev-1", errors.New("bad headers"))
	p := newPoller(t, b, outbox.PollerConfig{ClaimTTL: time.Minute, NodeID: "n1", BatchSize: 3, SkipRecent: -1})

	// One batch of 3 claimed: ev-0 runs (blocked), ev-1 is undecodable and goes DEAD
	// under the claim, ev-2 waits in the queue.
	if n, err := p.Poll(t.Context()); err != nil || n != 2 {
		t.Fatalf("Poll = %d, %v; want 2 queued", n, err)
	}
	eventually(t, "ev-0 running", func() bool { return len(g.delivered()) == 1 })
	if row := b.row(t, "ev-1"); row.Status != outbox.StatusDead || row.LockedBy != "" {
		t.Fatalf("undecodable row %+v, want DEAD and unclaimed", row)
	}
	tok := b.row(t, "ev-0").LockedBy
	if outbox.ClaimOwner(tok) != "n1" || b.row(t, "ev-2").LockedBy != tok {
		t.Fatalf("claims %q and %q", tok, b.row(t, "ev-2").LockedBy)
	}
	// Two of a batch of three are waiting or running: only one more is claimed.
	if n, err := p.Poll(t.Context()); err != nil || n != 2 {
		t.Fatalf("second Poll = %d, %v; want 2 (3 minus the one queued)", n, err)
	}
	claimed := 0
	for _, e := range b.store.Events() {
		if e.LockedBy != "" {
			claimed++
		}
	}
	if claimed != 4 { // ev-0 (running), ev-2, and the second batch's two
		t.Fatalf("%d rows claimed, want 4", claimed)
	}
}

// idHook gives the envelopes without an ID one in BeforeWrite.
type idHook struct{ outbox.NopWriterHook }

func (idHook) BeforeWrite(_ context.Context, envs []outbox.Envelope) ([]outbox.Envelope, error) {
	for i := range envs {
		if envs[i].ID == "" {
			envs[i].ID = "hook-" + strconv.Itoa(i)
		}
	}
	return envs, nil
}

// TestWriterSaysWhenIDsAreNew: the writer tells the store NewIDs only when it generated
// every event's ID, so that an ID a caller or a hook chose is still checked for.
func TestWriterSaysWhenIDsAreNew(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store := &paramsRecorder{MemoryStore: outboxtest.NewMemoryStore()}
	w := newWriter(t, store, outbox.WriterConfig{})
	for _, c := range []struct {
		name string
		envs []outbox.Envelope
		want bool
	}{
		{"one generated", []outbox.Envelope{{Type: "T", Payload: 1}}, true},
		{"all generated", []outbox.Envelope{{Type: "T", Payload: 1}, {Type: "T", Payload: 2}}, true},
		{"one given", []outbox.Envelope{{ID: "given", Type: "T", Payload: 1}}, false},
		{"one of two given", []outbox.Envelope{{Type: "T", Payload: 1}, {ID: "given-2", Type: "T", Payload: 2}}, false},
	} {
		if _, err := w.WriteAll(ctx, &hookedTx{}, c.envs); err != nil {
			t.Fatal(err)
		}
		if got := store.last().NewIDs; got != c.want {
			t.Errorf("%s: NewIDs %v, want %v", c.name, got, c.want)
		}
	}
	hooked := newWriter(t, store, outbox.WriterConfig{Hooks: []outbox.WriterHook{idHook{}}})
	if _, err := hooked.Write(ctx, &hookedTx{}, outbox.Envelope{Type: "T", Payload: 1}); err != nil {
		t.Fatal(err)
	}
	if p := store.last(); p.NewIDs || p.Events[0].ID != "hook-0" {
		t.Errorf("an ID set by BeforeWrite: NewIDs %v, ID %q; want false, hook-0", p.NewIDs, p.Events[0].ID)
	}
}
