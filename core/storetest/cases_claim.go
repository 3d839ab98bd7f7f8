package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// Claims follow the database clock, so these tests place rows relative to the real
// time (the database's, within clockSlack) instead of the fixed base time.

// clockSlack is how far the database clock may be from the test's when claim expiry is
// checked.
const clockSlack = 5 * time.Second

// ago returns the real time d ago.
func ago(d time.Duration) time.Time { return time.Now().Add(-d) }

// evAt returns a valid event created at created and due at available.
func evAt(id string, created, available time.Time) outbox.Event {
	e := ev(id, created)
	e.AvailableAt = available
	return e
}

func (x *fixture) claim(token string, ttl, skip time.Duration, limit int) storage.PendingBatch {
	x.Helper()
	b, err := x.claims().Claim(x.ctx, storage.ClaimParams{Token: token, TTL: ttl, SkipRecent: skip, Limit: limit})
	if err != nil {
		x.Fatalf("Claim(%s): %v", token, err)
	}
	if len(b.Undecodable) > 0 {
		x.Fatalf("Claim: undecodable rows %v", b.Undecodable)
	}
	return b
}

// wantClaimed checks that events carry the claim of token, expiring ttl after a moment
// between from and to (by the database clock, within clockSlack).
func (x *fixture) wantClaimed(events []outbox.Event, token string, ttl time.Duration, from, to time.Time) {
	x.Helper()
	for _, e := range events {
		if e.LockedBy != token {
			x.Fatalf("%s: LockedBy %q, want %q", e.ID, e.LockedBy, token)
		}
		lo, hi := from.Add(ttl-clockSlack), to.Add(ttl+clockSlack)
		if e.LockedUntil.Before(lo) || e.LockedUntil.After(hi) || e.LockedUntil.Location() != time.UTC {
			x.Fatalf("%s: LockedUntil %v, want UTC between %v and %v", e.ID, e.LockedUntil, lo, hi)
		}
		if got := x.get(e.ID); got.LockedBy != e.LockedBy || !got.LockedUntil.Equal(e.LockedUntil) {
			x.Fatalf("%s: Get has claim %q until %v, Claim returned %q until %v",
				e.ID, got.LockedBy, got.LockedUntil, e.LockedBy, e.LockedUntil)
		}
	}
}

func testClaimDueAndOrder(x *fixture) {
	x.insert(
		evAt("a", ago(3*time.Hour), ago(time.Hour)),
		evAt("b", ago(2*time.Hour), ago(2*time.Hour)),
		evAt("c", ago(time.Hour), ago(time.Hour)),
		evAt("future", ago(time.Hour), time.Now().Add(time.Hour)),
		evAt("recent", ago(10*time.Second), ago(10*time.Second)),
		evAt("done", ago(4*time.Hour), ago(4*time.Hour)),
		evAt("dead", ago(4*time.Hour), ago(4*time.Hour)),
		evAt("retry", ago(5*time.Hour), ago(5*time.Hour)),
	)
	x.markDone(time.Now(), "done")
	x.markDead("dead", "boom")
	x.retry("retry", ago(30*time.Minute))

	from := time.Now()
	b := x.claim("n1/first", time.Hour, time.Minute, 10)
	to := time.Now()
	// Due longest first: available_at, then created_at, then ID.
	x.wantIDs("Claim", b.Events, "b", "a", "c", "retry")
	x.wantClaimed(b.Events, "n1/first", time.Hour, from, to)
	if r := b.Events[3]; r.Status != outbox.StatusRetry || r.Attempts != 1 {
		x.Fatalf("claimed retry row: status %s, attempts %d", r.Status, r.Attempts)
	}
	// The claimed rows are taken; without SkipRecent the recent row is due too.
	x.wantIDs("second Claim", x.claim("n1/second", time.Hour, 0, 10).Events, "recent")
	x.wantIDs("third Claim", x.claim("n1/third", time.Hour, 0, 10).Events)
	// Pending, the single-node read, still sees claimed rows, in the claim's order.
	x.wantIDs("Pending", x.pending(time.Now(), 0, 10).Events, "b", "a", "c", "retry", "recent")
}

// testClaimDueFrom: a claim with DueFrom leaves out the rows due before it, whatever
// their creation, and claims those due at it or later in the claim's order; the rows it
// left out stay claimable.
func testClaimDueFrom(x *fixture) {
	mark := ago(time.Hour).Truncate(time.Millisecond)
	x.insert(
		evAt("before", ago(3*time.Hour), mark.Add(-time.Millisecond)),
		evAt("at", ago(3*time.Hour), mark),
		evAt("old-created", ago(5*time.Hour), mark.Add(time.Minute)),
		evAt("after", ago(2*time.Hour), mark.Add(time.Minute)),
		evAt("future", ago(time.Hour), time.Now().Add(time.Hour)),
	)
	b, err := x.claims().Claim(x.ctx, storage.ClaimParams{Token: "n1/from", TTL: time.Hour, Limit: 10, DueFrom: mark})
	if err != nil {
		x.Fatalf("Claim with DueFrom: %v", err)
	}
	x.wantIDs("Claim with DueFrom", b.Events, "at", "old-created", "after")
	x.wantIDs("Claim without", x.claim("n1/all", time.Hour, 0, 10).Events, "before")
}

func testClaimLimitDisjoint(x *fixture) {
	all := seq("lim-", 25)
	events := make([]outbox.Event, len(all))
	for i, id := range all {
		events[i] = evAt(id, ago(time.Hour-time.Duration(i)*time.Millisecond), ago(time.Hour))
	}
	x.insert(events...)
	seen := map[string]string{}
	for i, want := range []int{10, 10, 5, 0} {
		token := fmt.Sprintf("n%d/claim", i)
		b := x.claim(token, time.Hour, 0, 10)
		if len(b.Events) != want {
			x.Fatalf("claim %d returned %d events, want %d", i, len(b.Events), want)
		}
		for _, e := range b.Events {
			if prev, ok := seen[e.ID]; ok {
				x.Fatalf("%s claimed by %s and %s", e.ID, prev, token)
			}
			seen[e.ID] = token
		}
		if i == 0 {
			x.wantIDs("first claim", b.Events, all[:10]...)
		}
	}
}

// testClaimExpiry: an expired claim is taken by the next claim, which counts it as
// taken over when countsTakeOver.
func testClaimExpiry(x *fixture, countsTakeOver bool) {
	x.insert(evAt("live", ago(2*time.Hour), ago(2*time.Hour)), evAt("expiring", ago(time.Hour), ago(time.Hour)))
	first := x.claim("n1/live", time.Hour, 0, 1)
	x.wantIDs("live claim", first.Events, "live")
	if first.TakenOver != 0 {
		x.Fatalf("first claim: TakenOver %d, want 0 (the row was never claimed)", first.TakenOver)
	}
	const short = time.Second
	claimed := time.Now()
	x.wantIDs("short claim", x.claim("n1/short", short, 0, 1).Events, "expiring")
	early := x.claim("n2/early", time.Hour, 0, 10).Events
	if time.Since(claimed) >= short {
		// The machine is so loaded that the short claim expired before the second claim
		// ran: that claim may rightly have taken it, so the rest says nothing.
		x.Skipf("the %s claim expired before the next statement ran; machine too loaded to tell", short)
	}
	x.wantIDs("claim while both are live", early)
	time.Sleep(time.Until(claimed.Add(short + 300*time.Millisecond)))
	from := time.Now()
	b := x.claim("n2/late", time.Hour, 0, 10)
	x.wantIDs("claim after expiry", b.Events, "expiring")
	x.wantClaimed(b.Events, "n2/late", time.Hour, from, time.Now())
	if want := map[bool]int{true: 1}[countsTakeOver]; b.TakenOver != want {
		x.Fatalf("claim after expiry: TakenOver %d, want %d (the expired claim of n1/short)", b.TakenOver, want)
	}
	if got := x.get("live"); got.LockedBy != "n1/live" {
		x.Fatalf("live claim taken: LockedBy %q", got.LockedBy)
	}
}

func testClaimFencing(x *fixture) {
	x.insert(evAt("e", ago(time.Hour), ago(time.Hour)), evAt("f", ago(time.Hour), ago(time.Hour)),
		evAt("g", ago(time.Hour), ago(time.Hour)))
	x.wantIDs("stale claim", x.claim("a/1", 50*time.Millisecond, 0, 1).Events, "e")
	time.Sleep(300 * time.Millisecond)
	x.wantIDs("takeover", x.claim("b/1", time.Hour, 0, 1).Events, "e")

	// The stale token changes nothing.
	n, err := x.store().MarkDone(x.ctx, storage.MarkDoneParams{IDs: []string{"e"}, DoneAt: time.Now(), Token: "a/1"})
	x.changed("MarkDone with the stale token", n, err, 0)
	n, err = x.store().Reschedule(x.ctx, storage.RescheduleParams{ID: "e", Status: outbox.StatusRetry,
		AvailableAt: time.Now(), CountAttempt: true, LastError: "stale", Token: "a/1"})
	x.changed("Reschedule with the stale token", n, err, 0)
	n, err = x.store().MarkDead(x.ctx, storage.MarkDeadParams{ID: "e", DeadAt: time.Now(), Reason: "stale", Token: "a/1"})
	x.changed("MarkDead with the stale token", n, err, 0)
	if got := x.wantStatus("e", outbox.StatusNew); got.LockedBy != "b/1" || got.Attempts != 0 || got.LastError != "" {
		x.Fatalf("after stale updates: %+v", got)
	}

	// The current token records the outcome and ends the claim.
	n, err = x.store().MarkDead(x.ctx, storage.MarkDeadParams{ID: "e", DeadAt: time.Now(), Reason: "by b", Token: "b/1"})
	x.changed("MarkDead with the current token", n, err, 1)
	if got := x.wantStatus("e", outbox.StatusDead); got.LockedBy != "" || !got.LockedUntil.IsZero() || got.LastError != "by b" {
		x.Fatalf("after MarkDead: %+v", got)
	}
	n, err = x.store().MarkDone(x.ctx, storage.MarkDoneParams{IDs: []string{"e"}, DoneAt: time.Now(), Token: "b/1"})
	x.changed("MarkDone after the claim ended", n, err, 0)

	// Reschedule releases the claim: the row is claimable again when due.
	x.wantIDs("claim f", x.claim("c/1", time.Hour, 0, 1).Events, "f")
	n, err = x.store().Reschedule(x.ctx, storage.RescheduleParams{ID: "f", Status: outbox.StatusNew,
		AvailableAt: ago(2 * time.Hour), Token: "c/1"})
	x.changed("Reschedule with the current token", n, err, 1)
	if got := x.wantStatus("f", outbox.StatusNew); got.LockedBy != "" || !got.LockedUntil.IsZero() {
		x.Fatalf("after Reschedule: %+v", got)
	}
	x.wantIDs("reclaim f", x.claim("c/2", time.Hour, 0, 1).Events, "f")
	n, err = x.store().MarkDone(x.ctx, storage.MarkDoneParams{IDs: []string{"f"}, DoneAt: time.Now(), Token: "c/2"})
	x.changed("MarkDone with the current token", n, err, 1)
	if got := x.wantStatus("f", outbox.StatusDone); got.LockedBy != "" || !got.LockedUntil.IsZero() {
		x.Fatalf("after MarkDone: %+v", got)
	}

	// Without a token (single-node mode) an update is not fenced by the claim.
	x.wantIDs("claim g", x.claim("d/1", time.Hour, 0, 1).Events, "g")
	n, err = x.store().MarkDone(x.ctx, storage.MarkDoneParams{IDs: []string{"g"}, DoneAt: time.Now()})
	x.changed("MarkDone without a token", n, err, 1)
	if got := x.wantStatus("g", outbox.StatusDone); got.LockedBy != "" {
		x.Fatalf("after unfenced MarkDone: LockedBy %q", got.LockedBy)
	}
}

// testMarkDoneTokens: MarkDone with Tokens fences each row by its own claim token, in one
// call that mixes tokens.
func testMarkDoneTokens(x *fixture) {
	var evs []outbox.Event
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		evs = append(evs, evAt(id, ago(time.Hour), ago(time.Hour)))
	}
	x.insert(evs...)
	x.wantIDs("claim a and b", x.claim("n1/1", time.Hour, 0, 2).Events, "a", "b")
	x.wantIDs("claim c and d", x.claim("n1/2", time.Hour, 0, 2).Events, "c", "d")
	x.wantIDs("claim e", x.claim("n2/1", time.Hour, 0, 1).Events, "e")
	// b is paired with a token that does not hold it, e with this node's token while
	// another node holds it, and "gone" does not exist.
	n, err := x.store().MarkDone(x.ctx, storage.MarkDoneParams{
		IDs:    []string{"a", "b", "c", "d", "e", "gone"},
		Tokens: []string{"n1/1", "n1/2", "n1/2", "n1/2", "n1/1", "n1/1"},
		DoneAt: time.Now(),
	})
	x.changed("MarkDone with Tokens", n, err, 3)
	for _, id := range []string{"a", "c", "d"} {
		if got := x.wantStatus(id, outbox.StatusDone); got.LockedBy != "" || !got.LockedUntil.IsZero() {
			x.Fatalf("%s after MarkDone with its token: %+v", id, got)
		}
	}
	if got := x.wantStatus("b", outbox.StatusNew); got.LockedBy != "n1/1" {
		x.Fatalf("b changed by another token: %+v", got)
	}
	if got := x.wantStatus("e", outbox.StatusNew); got.LockedBy != "n2/1" {
		x.Fatalf("e changed under another node's claim: %+v", got)
	}
	// DONE rows stay as they are, even with their old token.
	n, err = x.store().MarkDone(x.ctx, storage.MarkDoneParams{IDs: []string{"a", "b"}, Tokens: []string{"n1/1", "n1/1"}, DoneAt: time.Now()})
	x.changed("MarkDone with Tokens again", n, err, 1)
	x.wantStatus("b", outbox.StatusDone)
}

func testInsertClaimed(x *fixture) {
	pre := evAt("pre", ago(time.Hour), ago(time.Hour))
	pre.LockedBy = "w/1"
	short := evAt("short", ago(time.Hour), ago(time.Hour))
	short.LockedBy = "w/2"
	plain := evAt("plain", ago(time.Hour), ago(time.Hour))
	plain.LockedUntil = time.Now().Add(time.Hour) // ignored without LockedBy
	from := time.Now()
	if _, err := x.store().Insert(x.ctx, x.exec(), storage.InsertParams{Events: []outbox.Event{pre, plain}, ClaimTTL: time.Hour}); err != nil {
		x.Fatalf("Insert claimed: %v", err)
	}
	to := time.Now()
	x.wantClaimed([]outbox.Event{x.get("pre")}, "w/1", time.Hour, from, to)
	if got := x.get("plain"); got.LockedBy != "" || !got.LockedUntil.IsZero() {
		x.Fatalf("unclaimed row inserted with claim %q until %v", got.LockedBy, got.LockedUntil)
	}
	// A second is short enough to wait out, and long enough that the claim right after
	// the insert runs within it on a loaded machine (CI saw 100 ms run out under -race).
	if _, err := x.store().Insert(x.ctx, x.exec(), storage.InsertParams{Events: []outbox.Event{short}, ClaimTTL: time.Second}); err != nil {
		x.Fatalf("Insert claimed: %v", err)
	}
	x.wantIDs("claim beside pre-claimed rows", x.claim("p/1", time.Hour, 0, 10).Events, "plain")
	time.Sleep(1300 * time.Millisecond)
	x.wantIDs("claim after the short pre-claim expired", x.claim("p/2", time.Hour, 0, 10).Events, "short")
	n, err := x.store().MarkDone(x.ctx, storage.MarkDoneParams{IDs: []string{"pre"}, DoneAt: time.Now(), Token: "w/1"})
	x.changed("MarkDone with the insert's token", n, err, 1)
	n, err = x.store().MarkDone(x.ctx, storage.MarkDoneParams{IDs: []string{"short"}, DoneAt: time.Now(), Token: "w/2"})
	x.changed("MarkDone with the expired insert token", n, err, 0)
}

func testRenewClaim(x *fixture) {
	x.insert(evAt("r", ago(time.Hour), ago(time.Hour)), evAt("s", ago(time.Hour), ago(time.Hour)))
	renew := func(id, token string, ttl time.Duration) int64 {
		x.Helper()
		n, err := x.claims().RenewClaim(x.ctx, storage.RenewClaimParams{ID: id, Token: token, TTL: ttl})
		if err != nil {
			x.Fatalf("RenewClaim(%s, %s): %v", id, token, err)
		}
		return n
	}
	x.wantIDs("claim r", x.claim("a/1", 50*time.Millisecond, 0, 1).Events, "r")
	if n := renew("s", "a/1", time.Hour); n != 0 {
		x.Fatalf("renewed an unclaimed row: %d", n)
	}
	// A claim that expired but that nobody took over is still held, and renewed.
	time.Sleep(300 * time.Millisecond)
	from := time.Now()
	if n := renew("r", "a/1", time.Hour); n != 1 {
		x.Fatalf("renewal of an expired, untaken claim changed %d rows, want 1", n)
	}
	x.wantClaimed([]outbox.Event{x.get("r")}, "a/1", time.Hour, from, time.Now())
	x.wantIDs("claim after the renewal", x.claim("b/1", time.Hour, 0, 10).Events, "s")
	// Taken over: the old token renews nothing.
	if n := renew("s", "a/1", time.Hour); n != 0 {
		x.Fatalf("renewal with another node's token changed %d rows", n)
	}
	// Finished: nothing to renew.
	n, err := x.store().MarkDone(x.ctx, storage.MarkDoneParams{IDs: []string{"r"}, DoneAt: time.Now(), Token: "a/1"})
	x.changed("MarkDone", n, err, 1)
	if n := renew("r", "a/1", time.Hour); n != 0 {
		x.Fatalf("renewal of a DONE row changed %d rows", n)
	}
	for name, p := range map[string]storage.RenewClaimParams{
		"no ID":      {Token: "a/1", TTL: time.Second},
		"no token":   {ID: "s", TTL: time.Second},
		"long token": {ID: "s", Token: strings.Repeat("t", outbox.MaxClaimTokenLen+1), TTL: time.Second},
		"zero TTL":   {ID: "s", Token: "b/1"},
	} {
		if n, err := x.claims().RenewClaim(x.ctx, p); !errors.Is(err, outbox.ErrInvalidArgument) {
			x.Errorf("RenewClaim with %s = %d, %v; want ErrInvalidArgument", name, n, err)
		}
	}
	ctx, cancel := context.WithCancel(x.ctx)
	cancel()
	if _, err := x.claims().Claim(ctx, storage.ClaimParams{Token: "c/1", TTL: time.Second, Limit: 1}); !errors.Is(err, context.Canceled) {
		x.Errorf("Claim with a canceled context: %v", err)
	}
	if _, err := x.claims().RenewClaim(ctx, storage.RenewClaimParams{ID: "s", Token: "b/1", TTL: time.Second}); !errors.Is(err, context.Canceled) {
		x.Errorf("RenewClaim with a canceled context: %v", err)
	}
}

func testClaimConcurrent(x *fixture) {
	const rows, limit, claimers = 200, 7, 4
	all := seq("conc-", rows)
	events := make([]outbox.Event, rows)
	for i, id := range all {
		events[i] = evAt(id, ago(time.Hour), ago(time.Hour))
	}
	x.insert(events...)
	var (
		mu   sync.Mutex
		seen = map[string]string{}
		errs []error
		wg   sync.WaitGroup
	)
	for c := range claimers {
		wg.Go(func() {
			for i := 0; ; i++ {
				token := fmt.Sprintf("c%d/%d", c, i)
				b, err := x.claims().Claim(x.ctx, storage.ClaimParams{Token: token, TTL: time.Hour, Limit: limit})
				mu.Lock()
				if err == nil && len(b.Events) > limit {
					err = fmt.Errorf("%s: %d events, more than the limit %d", token, len(b.Events), limit)
				}
				for _, e := range b.Events {
					if prev, ok := seen[e.ID]; ok && err == nil {
						err = fmt.Errorf("%s claimed by %s and %s", e.ID, prev, token)
					}
					seen[e.ID] = token
				}
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
				if err != nil || len(b.Events) == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		x.Fatal(err)
	}
	if len(seen) != rows {
		x.Fatalf("%d rows claimed, want %d", len(seen), rows)
	}
}

func testClaimBadParams(x *fixture) {
	long := strings.Repeat("t", outbox.MaxClaimTokenLen+1)
	x.insert(evAt("bp", ago(time.Hour), ago(time.Hour)))
	for name, p := range map[string]storage.ClaimParams{
		"empty token":    {TTL: time.Second, Limit: 1},
		"long token":     {Token: long, TTL: time.Second, Limit: 1},
		"zero ttl":       {Token: "n/1", Limit: 1},
		"negative ttl":   {Token: "n/1", TTL: -time.Second, Limit: 1},
		"negative skip":  {Token: "n/1", TTL: time.Second, SkipRecent: -1, Limit: 1},
		"zero limit":     {Token: "n/1", TTL: time.Second},
		"negative limit": {Token: "n/1", TTL: time.Second, Limit: -1},
	} {
		if b, err := x.claims().Claim(x.ctx, p); !errors.Is(err, outbox.ErrInvalidArgument) {
			x.Errorf("Claim with %s = %+v, %v; want ErrInvalidArgument", name, b, err)
		}
	}
	claimed := evAt("claimed-no-ttl", ago(time.Hour), ago(time.Hour))
	claimed.LockedBy = "w/1"
	if _, err := x.store().Insert(x.ctx, x.exec(), storage.InsertParams{Events: []outbox.Event{claimed}}); !errors.Is(err, outbox.ErrInvalidArgument) {
		x.Errorf("Insert of a claimed event without ClaimTTL: %v, want ErrInvalidArgument", err)
	}
	claimed.LockedBy = long
	if _, err := x.store().Insert(x.ctx, x.exec(), storage.InsertParams{Events: []outbox.Event{claimed}, ClaimTTL: time.Second}); !errors.Is(err, outbox.ErrInvalidArgument) {
		x.Errorf("Insert with a long token: %v, want ErrInvalidArgument", err)
	}
	x.notFound("claimed-no-ttl")
	if n, err := x.store().MarkDone(x.ctx, storage.MarkDoneParams{IDs: []string{"bp"}, DoneAt: time.Now(), Token: long}); !errors.Is(err, outbox.ErrInvalidArgument) {
		x.Errorf("MarkDone with a long token = %d, %v; want ErrInvalidArgument", n, err)
	}
	if got := x.get("bp"); got.LockedBy != "" || got.Status != outbox.StatusNew {
		x.Fatalf("bad params changed the row: %+v", got)
	}
}
