package dispatch

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/outboxkit/outbox/core/internal/startstop"
	"github.com/outboxkit/outbox/core/storage"
)

// Releaser gives back, in MultiNode mode, the claims of events this node holds but will
// not deliver, so that pollers take them at once instead of after ClaimTTL: events a
// hard stop discarded, events a poll claimed that the queues refused, and pre-claimed
// events the hot path refused at commit (returns, released by the dispatcher's returner
// goroutine). The hot path, the orderer, the poller and the dispatcher share one.
type Releaser struct {
	store         storage.ClaimStore
	q             *Queues
	statusTimeout time.Duration // bounds one release; <= 0: a second
	now           func() time.Time
	metrics       Metrics
	log           *slog.Logger
	notifyOthers  func() // nil, or tells other processes about released events
	returns       claimReturns
}

// ReleaserConfig configures a [Releaser].
type ReleaserConfig struct {
	StatusTimeout time.Duration
	Now           func() time.Time
	Metrics       Metrics
	Logger        *slog.Logger
	// NotifyOthers, when set, tells other processes (the Notifier) about released claims.
	NotifyOthers func()
}

// NewReleaser returns the releaser of store's claims for the events of q.
func NewReleaser(store storage.ClaimStore, q *Queues, cfg ReleaserConfig) *Releaser {
	return &Releaser{store: store, q: q, statusTimeout: cfg.StatusTimeout, now: cfg.Now, metrics: cfg.Metrics,
		log: cfg.Logger.With(slog.String("component", "dispatcher")), notifyOthers: cfg.NotifyOthers,
		returns: claimReturns{wake: make(chan struct{}, 1)}}
}

// Released releases the claims of events a poll claimed and the queues refused, and
// tells the other processes when it released some. It returns how many.
func (c *Releaser) Released(ctx context.Context, events []Event) int64 {
	n := c.Release(ctx, events, WhyRefused)
	if n > 0 && c.notifyOthers != nil {
		c.notifyOthers()
	}
	return n
}

// claimReturns holds events that this node's writer inserted claimed for its hot path
// but that the hot queue refused when their transaction committed (it filled up in
// between, or the Dispatcher was not running). Their claims are released at once, by
// the dispatcher's returner goroutine, so that a poller (this node's, woken to catch up,
// or another's) claims them now instead of when the pre-claim expires, ClaimTTL later.
type claimReturns struct {
	mu      sync.Mutex
	pending []Event // guarded by mu; at most maxClaimReturns, ID and LockedBy only
	wake    chan struct{}
}

// maxClaimReturns bounds the events waiting for their claims to be released; beyond
// it, refused events wait for their claims to expire.
const maxClaimReturns = 10000

// add queues events for release and reports how many did not fit.
func (c *claimReturns) add(events []Event) int {
	c.mu.Lock()
	n := min(len(events), maxClaimReturns-len(c.pending))
	for _, e := range events[:n] { // the claim is all a release needs: no payload kept
		c.pending = append(c.pending, Event{ID: e.ID, LockedBy: e.LockedBy})
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return len(events) - n
}

func (c *claimReturns) take() []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.pending
	c.pending = nil
	return out
}

// Return is the hot path's and the orderer's hand-off of refused pre-claimed events.
// When the dispatcher is not running (the events were claimed before a Stop), it
// releases their claims itself, on the calling goroutine, bounded by StatusTimeout.
func (c *Releaser) Return(ctx context.Context, events []Event) {
	if !c.q.IsAccepting() {
		if c.Release(ctx, events, whyNotTaken) > 0 && c.notifyOthers != nil {
			c.notifyOthers()
		}
		return
	}
	if over := c.returns.add(events); over > 0 {
		c.log.LogAttrs(ctx, slog.LevelWarn, "too many refused hot-path events waiting for their claims to be released; "+
			"the rest wait for their claims to expire", slog.Int("events", over))
	}
}

// runReturns releases the claims handed over by Return until the run stops, then once
// more for what is left.
func (c *Releaser) runReturns(r startstop.Run) {
	for {
		select {
		case <-c.returns.wake:
			c.releaseReturned(r.Ctx)
		case <-r.Stopping:
			c.releaseReturned(r.Ctx)
			return
		case <-r.Ctx.Done():
			return
		}
	}
}

func (c *Releaser) releaseReturned(ctx context.Context) {
	events := c.returns.take()
	if len(events) == 0 {
		return
	}
	if c.Release(ctx, events, whyNotTaken) == 0 {
		return // rolled back: no row, nothing for a poller to read
	}
	c.q.SignalCatchUp()
	if c.notifyOthers != nil {
		c.notifyOthers()
	}
}

// hardStop releases the claims of the events a hard stop discarded and of the returns
// left.
func (c *Releaser) hardStop(ctx context.Context, discarded []Event) {
	c.Release(ctx, discarded, whyHardStop)
	c.Release(ctx, c.returns.take(), whyNotTaken)
}

// Release releases the claims of events this node holds but will not deliver
// (discarded by a hard stop, refused by the full hot queue, or claimed by a poll and
// refused by the queues; why says which), so that
// pollers take them at once instead of after ClaimTTL. The SQL store does it with one
// statement per chunk (each row fenced by its own token); other claim stores get each
// claim renewed to expire a microsecond later. It is bounded by StatusTimeout (or a
// second), and a failure only delays those events until their claims expire.
// It returns how many claims it released.
func (c *Releaser) Release(ctx context.Context, events []Event, why string) int64 {
	if c == nil || len(events) == 0 {
		return 0
	}
	budget := c.statusTimeout
	if budget <= 0 {
		budget = time.Second
	}
	// Survive a stop, except for a poll's refusals: the poller's stop must not wait
	// for a release that a dead database would make last the whole budget.
	base := context.WithoutCancel(ctx)
	if why == WhyRefused {
		base = ctx
	}
	ctx, cancel := context.WithTimeout(base, budget)
	defer cancel()
	var released int64
	var err error
	if r, ok := c.store.(ClaimReleaser); ok {
		ids, tokens := make([]string, len(events)), make([]string, len(events))
		for i, e := range events {
			ids[i], tokens[i] = e.ID, e.LockedBy
		}
		released, err = r.ReleaseClaims(ctx, ids, tokens)
	} else {
		for _, e := range events {
			var n int64
			n, err = c.store.RenewClaim(ctx, storage.RenewClaimParams{ID: e.ID, Token: e.LockedBy, TTL: time.Microsecond})
			if err != nil {
				break
			}
			released += n
		}
		if released > 0 && why != WhyRefused {
			// Poll once those claims have expired; not for events this node's poller
			// refused (it would claim and refuse them again).
			c.q.NoteDue(c.now().Add(time.Microsecond))
		}
	}
	if released > 0 {
		c.metrics.Claims(ClaimReleased, int(released))
	}
	attrs := []slog.Attr{slog.String("events", why), slog.Int("claimed", len(events)), slog.Int64("released", released)}
	if err != nil {
		c.log.LogAttrs(ctx, slog.LevelWarn, "releasing claims failed; the events wait for their claims to expire",
			append(attrs, slog.String("error", err.Error()))...)
		return released
	}
	level := slog.LevelDebug // routine under bursts
	if why == whyHardStop {
		level = slog.LevelInfo
	}
	c.log.LogAttrs(ctx, level, "released the claims of events this node will not deliver", attrs...)
	return released
}

// Why Release runs, for its log line.
const (
	whyHardStop = "discarded by a hard stop"
	whyNotTaken = "pre-claimed, not taken by the hot path (queue full, dispatcher stopping, or COMMIT failed)"
	WhyRefused  = "claimed by a poll, refused by the dispatcher (queue full, or the event in flight or just finished here)"
)

// ClaimReleaser is implemented by the SQL store: it clears the claims of the NEW and
// RETRY rows ids[i] still held by tokens[i], with one statement per chunk.
type ClaimReleaser interface {
	ReleaseClaims(ctx context.Context, ids, tokens []string) (int64, error)
}
