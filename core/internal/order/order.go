// Package order moves the keys of ordered events on: it promotes the next event of a key
// after a commit, after an outcome and in the poller's sweep, and hands what it promotes
// to the hot path (docs/ordering.md; each database's promote is in internal/sqlstore).
package order

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/outboxkit/outbox/core/internal/dispatch"
	"github.com/outboxkit/outbox/core/internal/ids"
	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// SweepEvery is how often the poller looks for keys whose next event nobody
// promoted (a process stopped between a commit and its promote, a promote failed, or
// the event was written through a transaction without after-commit hooks).
const SweepEvery = time.Second

// sweepLimit bounds the keys one sweep statement promotes.
const sweepLimit = 1000

// Orderer moves keys on: after a transaction that wrote ordered events commits, after
// an ordered event is finished, after a replay, and in the poller's sweep. Promote
// changes no row when the key is held, so a redundant call is harmless.
type Orderer struct {
	store      storage.OrderStore
	deadBlocks bool
	timeout    time.Duration // bounds each statement; <= 0 none
	wake       func()        // wakes the pollers that deliver promoted events
	log        *slog.Logger
	// hot, when set, is this process's hot path: AfterCommit hands it the events of a
	// write that are next in their keys. Under claims (claimTTL > 0) they are claimed
	// by the promote, with a token of nodeID, and release gives back those it refuses.
	hot      *dispatch.HotPath
	release  *dispatch.Releaser
	claimTTL time.Duration
	nodeID   string
	now      func() time.Time
}

// Config configures an [Orderer].
type Config struct {
	// DeadBlocks makes a DEAD event hold its key (DeadKeyWaits).
	DeadBlocks bool
	// Timeout bounds each statement; <= 0 means none.
	Timeout time.Duration
	Logger  *slog.Logger
	// Wake wakes the pollers (this process's and, through the Notifier, the others')
	// when promoted events are left to them. Required.
	Wake func()
	// Hot is this process's hot path, nil when it has none (WriterOnly). Now is its
	// clock.
	Hot *dispatch.HotPath
	Now func() time.Time
	// ClaimTTL and NodeID, in MultiNode mode, make promotes claim what they hand to Hot.
	ClaimTTL time.Duration
	NodeID   string
}

// New returns the orderer of store's keys, or nil when store keeps no order.
func New(store storage.Store, cfg Config) *Orderer {
	os, ok := store.(storage.OrderStore)
	if !ok {
		return nil
	}
	o := &Orderer{store: os, deadBlocks: cfg.DeadBlocks, timeout: cfg.Timeout, log: cfg.Logger, wake: cfg.Wake,
		hot: cfg.Hot, now: cfg.Now, claimTTL: cfg.ClaimTTL, nodeID: cfg.NodeID}
	if cfg.Hot != nil {
		o.release = cfg.Hot.Releaser()
	}
	return o
}

// DeadBlocks reports whether a DEAD event holds its key.
func (o *Orderer) DeadBlocks() bool { return o.deadBlocks }

// AfterCommit moves on the keys of a write that committed. Without a hot path it is
// promote. With one, the write's first due event of each key is promoted if it is next
// in its key (nothing earlier of the key is left), claimed for this node under claims,
// and handed to the hot path, as an unordered event is after its commit. When some of
// them are not next, none is handed over: the keys are promoted as usual and the poller
// delivers what moved (claims taken by the promote are given back).
func (o *Orderer) AfterCommit(ctx context.Context, events []outboxtype.Event, keys []string) {
	if o.hot == nil || !o.hot.Queues().HotEnabled() || o.hot.StandingBy() {
		o.Promote(ctx, keys)
		return
	}
	now := o.now()
	var next []outboxtype.Event // the first due event of each key of the write
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
		o.Promote(ctx, keys)
		return
	}
	p := storage.PromoteParams{IDs: make([]string, len(next)), DeadBlocks: o.deadBlocks}
	for i := range next {
		p.IDs[i] = next[i].ID
	}
	start := time.Now()
	if o.claimTTL > 0 {
		p.Token, p.TTL = ids.NewClaimToken(o.nodeID), o.claimTTL
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
			next[i].Status = outboxtype.StatusNew
			if p.Token != "" {
				// The database starts the claim after this moment: a conservative end.
				next[i].LockedBy, next[i].LockedUntil = p.Token, start.Add(o.claimTTL)
			}
		}
		o.hot.Deliver(ctx, next)
		if len(next) < len(keys) { // keys whose first event of this write is delayed
			handed := make(map[string]bool, len(next))
			for _, e := range next {
				handed[e.OrderKey] = true
			}
			o.Promote(ctx, slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return handed[k] }))
		}
		return
	}
	if n > 0 && p.Token != "" && o.release != nil {
		claimed := make([]outboxtype.Event, len(next))
		for i := range next { // a release is fenced by the token: only what was promoted
			claimed[i] = outboxtype.Event{ID: next[i].ID, LockedBy: p.Token}
		}
		o.release.Return(ctx, claimed)
	}
	if n > 0 {
		o.wake()
	}
	o.Promote(ctx, keys)
}

// Promote moves keys on, waking the pollers when it promoted an event. A failure is
// logged: the sweep moves the keys on later.
func (o *Orderer) Promote(ctx context.Context, keys []string) {
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

// Finished moves on the keys of ordered events that were just finished (their
// outcomes written, and released from the dispatcher's queues), and hands the events it
// promotes to the hot path, as afterCommit does a write's: read back by the promote,
// claimed by it for this node under claims. Without a hot path, or while the dispatcher
// is not taking events, it is promote. A promoted event the hot path cannot take (full,
// not due yet, undecodable) is left to the poller: its claim is given back and the
// poller woken, or told when it falls due.
func (o *Orderer) Finished(ctx context.Context, keys []string) {
	if o == nil || len(keys) == 0 {
		return
	}
	if o.hot == nil || !o.hot.Queues().HotEnabled() || !o.hot.Queues().IsAccepting() {
		o.Promote(ctx, keys)
		return
	}
	p := storage.PromoteParams{Keys: keys, DeadBlocks: o.deadBlocks, Read: true}
	if o.claimTTL > 0 {
		p.Token, p.TTL = ids.NewClaimToken(o.nodeID), o.claimTTL
	}
	// A promoted row that a poll queues, delivers and finishes (a retry) before the
	// hand-off below is refused there as a stale copy.
	readAt, endRead := o.hot.Queues().BeginRead()
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
	var due, left []outboxtype.Event
	for _, e := range res.Events {
		if p.Token != "" {
			// The database starts the claim after start: a conservative end.
			e.LockedBy, e.LockedUntil = p.Token, start.Add(o.claimTTL)
		}
		if e.AvailableAt.After(now) {
			o.hot.Queues().NoteDue(e.AvailableAt) // the poller reads it when it falls due
			left = append(left, e)
			continue
		}
		due = append(due, e)
	}
	for _, re := range res.Undecodable { // the poller moves it to DEAD
		left = append(left, outboxtype.Event{ID: re.EventID, LockedBy: p.Token})
	}
	if p.Token != "" && len(left) > 0 && o.release != nil {
		o.release.Return(ctx, left)
	}
	o.hot.DeliverRead(ctx, due, readAt)
	if res.Promoted > int64(len(due)) {
		o.wake() // promoted and not handed over (or not read back): the pollers take them
	}
}

// Sweep promotes the next event of every key that nobody moved on, and returns how
// many it promoted.
func (o *Orderer) Sweep(ctx context.Context) (int64, error) {
	if o == nil {
		return 0, nil
	}
	var total int64
	for range 10 { // at most 10,000 keys a sweep; the next sweep takes the rest
		sctx, cancel := o.context(ctx)
		res, err := o.store.Promote(sctx, storage.PromoteParams{DeadBlocks: o.deadBlocks, Limit: sweepLimit})
		cancel()
		total += res.Promoted
		if err != nil {
			return total, fmt.Errorf("promote: %w", err)
		}
		if res.Promoted < sweepLimit {
			break
		}
	}
	return total, nil
}

// context bounds one statement by the timeout; the caller decides whether it survives
// a stop (the writer's and the dispatcher's promotes do, the poller's sweep does not).
func (o *Orderer) context(ctx context.Context) (context.Context, context.CancelFunc) {
	if o.timeout > 0 {
		return context.WithTimeout(ctx, o.timeout)
	}
	return context.WithCancel(ctx)
}
