package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/outboxkit/outbox/core/storage"
)

// DeadKeyPolicy is what a key's events do while one of them is DEAD.
type DeadKeyPolicy int

const (
	DeadKeyWaits DeadKeyPolicy = iota // the default: they wait until it is replayed or deleted
	DeadKeySkips                      // they move on; a replayed DEAD event goes next in line
)

// orderSweepEvery is how often the poller looks for keys whose next event nobody
// promoted (a process stopped between a commit and its promote, a promote failed, or
// the event was written through a transaction without after-commit hooks).
const orderSweepEvery = time.Second

// orderSweepLimit bounds the keys one sweep statement promotes.
const orderSweepLimit = 1000

// orderer moves keys on: after a transaction that wrote ordered events commits, after
// an ordered event is finished, after a replay, and in the poller's sweep. Promote
// changes no row when the key is held, so a redundant call is harmless.
type orderer struct {
	store      storage.OrderStore
	deadBlocks bool
	timeout    time.Duration // bounds each statement; <= 0 none
	wake       func()        // wakes the pollers that deliver promoted events
	log        *slog.Logger
	// hot, when set, is this process's hot path: afterCommit hands it the events of a
	// write that are next in their keys. Under claims (claimTTL > 0) they are claimed
	// by the promote, with a token of nodeID.
	hot      *hotPath
	claimTTL time.Duration
	nodeID   string
	now      func() time.Time
}

// newOrderer returns nil when store keeps no order.
func newOrderer(store storage.Store, policy DeadKeyPolicy, timeout time.Duration, log *slog.Logger) *orderer {
	os, ok := store.(storage.OrderStore)
	if !ok {
		return nil
	}
	return &orderer{store: os, deadBlocks: policy == DeadKeyWaits, timeout: timeout, log: log, wake: func() {}}
}

// eventKeys returns the distinct order keys of events, nil when none is ordered.
func eventKeys(events []Event) []string {
	return distinctKeys(len(events), func(i int) string { return events[i].OrderKey })
}

// distinctKeys returns the distinct non-empty keys key(0) … key(n-1) in order, nil when
// there is none; it allocates nothing then.
func distinctKeys(n int, key func(i int) string) []string {
	var keys []string
	var seen map[string]bool
	for i := range n {
		k := key(i)
		if k == "" || seen[k] {
			continue
		}
		if seen == nil {
			seen = map[string]bool{}
		}
		seen[k] = true
		keys = append(keys, k)
	}
	return keys
}

// afterCommit moves on the keys of a write that committed. Without a hot path it is
// promote. With one, the write's first due event of each key is promoted if it is next
// in its key (nothing earlier of the key is left), claimed for this node under claims,
// and handed to the hot path, as an unordered event is after its commit. When some of
// them are not next, none is handed over: the keys are promoted as usual and the poller
// delivers what moved (claims taken by the promote are given back).
func (o *orderer) afterCommit(ctx context.Context, events []Event, keys []string) {
	if o.hot == nil || !o.hot.q.hotEnabled() || o.hot.standingBy() {
		o.promote(ctx, keys)
		return
	}
	now := o.now()
	var next []Event // the first due event of each key of the write
	seen := make(map[string]bool, len(keys))
	for _, e := range events {
		if e.OrderKey == "" || seen[e.OrderKey] {
			continue
		}
		seen[e.OrderKey] = true
		if !e.AvailableAt.After(now) {
			next = append(next, e)
		}
	}
	if len(next) == 0 {
		o.promote(ctx, keys)
		return
	}
	p := storage.PromoteParams{IDs: make([]string, len(next)), DeadBlocks: o.deadBlocks}
	for i := range next {
		p.IDs[i] = next[i].ID
	}
	start := time.Now()
	if o.claimTTL > 0 {
		p.Token, p.TTL = newClaimToken(o.nodeID), o.claimTTL
	}
	pctx, cancel := o.context(ctx)
	res, err := o.store.Promote(pctx, p)
	cancel()
	n := res.Promoted
	if err != nil {
		o.log.LogAttrs(ctx, slog.LevelWarn, "promote failed; the poller's sweep moves the keys on",
			slog.Int("keys", len(keys)), slog.String("error", err.Error()))
		return
	}
	if n == int64(len(next)) {
		for i := range next {
			next[i].Status = StatusNew
			if p.Token != "" {
				// The database starts the claim after this moment: a conservative end.
				next[i].LockedBy, next[i].LockedUntil = p.Token, start.Add(o.claimTTL)
			}
		}
		o.hot.deliver(ctx, next)
		if len(next) < len(keys) { // keys whose first event of this write is delayed
			handed := make(map[string]bool, len(next))
			for _, e := range next {
				handed[e.OrderKey] = true
			}
			o.promote(ctx, slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return handed[k] }))
		}
		return
	}
	if n > 0 && p.Token != "" && o.hot.returnClaims != nil {
		claimed := make([]Event, len(next))
		for i := range next { // a release is fenced by the token: only what was promoted
			claimed[i] = Event{ID: next[i].ID, LockedBy: p.Token}
		}
		o.hot.returnClaims(ctx, claimed)
	}
	if n > 0 {
		o.wake()
	}
	o.promote(ctx, keys)
}

// promote moves keys on, waking the pollers when it promoted an event. A failure is
// logged: the sweep moves the keys on later.
func (o *orderer) promote(ctx context.Context, keys []string) {
	if o == nil || len(keys) == 0 {
		return
	}
	ctx, cancel := o.context(ctx)
	res, err := o.store.Promote(ctx, storage.PromoteParams{Keys: keys, DeadBlocks: o.deadBlocks})
	cancel()
	if err != nil {
		o.log.LogAttrs(ctx, slog.LevelWarn, "promote failed; the poller's sweep moves the keys on",
			slog.Int("keys", len(keys)), slog.String("error", err.Error()))
	}
	if res.Promoted > 0 {
		o.wake()
	}
}

// finished moves on the keys of ordered events that were just finished (their
// outcomes written, and released from the dispatcher's queues), and hands the events it
// promotes to the hot path, as afterCommit does a write's: read back by the promote,
// claimed by it for this node under claims. Without a hot path, or while the dispatcher
// is not taking events, it is promote. A promoted event the hot path cannot take (full,
// not due yet, undecodable) is left to the poller: its claim is given back and the
// poller woken, or told when it falls due.
func (o *orderer) finished(ctx context.Context, keys []string) {
	if o == nil || len(keys) == 0 {
		return
	}
	if o.hot == nil || !o.hot.q.hotEnabled() || !o.hot.q.isAccepting() {
		o.promote(ctx, keys)
		return
	}
	p := storage.PromoteParams{Keys: keys, DeadBlocks: o.deadBlocks, Read: true}
	if o.claimTTL > 0 {
		p.Token, p.TTL = newClaimToken(o.nodeID), o.claimTTL
	}
	// A promoted row that a poll queues, delivers and finishes (a retry) before the
	// hand-off below is refused there as a stale copy.
	readAt, endRead := o.hot.q.beginRead()
	defer endRead()
	start := time.Now()
	pctx, cancel := o.context(ctx)
	res, err := o.store.Promote(pctx, p)
	cancel()
	if err != nil {
		o.log.LogAttrs(ctx, slog.LevelWarn, "promote failed; the poller's sweep moves the keys on",
			slog.Int("keys", len(keys)), slog.String("error", err.Error()))
	}
	now := o.now()
	var due, left []Event
	for _, e := range res.Events {
		if p.Token != "" {
			// The database starts the claim after start: a conservative end.
			e.LockedBy, e.LockedUntil = p.Token, start.Add(o.claimTTL)
		}
		if e.AvailableAt.After(now) {
			o.hot.q.noteDue(e.AvailableAt) // the poller reads it when it falls due
			left = append(left, e)
			continue
		}
		due = append(due, e)
	}
	for _, re := range res.Undecodable { // the poller moves it to DEAD
		left = append(left, Event{ID: re.EventID, LockedBy: p.Token})
	}
	if p.Token != "" && len(left) > 0 && o.hot.returnClaims != nil {
		o.hot.returnClaims(ctx, left)
	}
	o.hot.deliverRead(ctx, due, readAt)
	if res.Promoted > int64(len(due)) {
		o.wake() // promoted and not handed over (or not read back): the pollers take them
	}
}

// sweep promotes the next event of every key that nobody moved on, and returns how
// many it promoted.
func (o *orderer) sweep(ctx context.Context) (int64, error) {
	if o == nil {
		return 0, nil
	}
	var total int64
	for range 10 { // at most 10,000 keys a sweep; the next sweep takes the rest
		sctx, cancel := o.context(ctx)
		res, err := o.store.Promote(sctx, storage.PromoteParams{DeadBlocks: o.deadBlocks, Limit: orderSweepLimit})
		cancel()
		total += res.Promoted
		if err != nil {
			return total, fmt.Errorf("promote: %w", err)
		}
		if res.Promoted < orderSweepLimit {
			break
		}
	}
	return total, nil
}

// context bounds one statement by the timeout; the caller decides whether it survives
// a stop (the writer's and the dispatcher's promotes do, the poller's sweep does not).
func (o *orderer) context(ctx context.Context) (context.Context, context.CancelFunc) {
	if o.timeout > 0 {
		return context.WithTimeout(ctx, o.timeout)
	}
	return context.WithCancel(ctx)
}
