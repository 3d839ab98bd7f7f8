package outbox

import (
	"context"
	"log/slog"
	"sync"

	"github.com/outboxkit/outbox/core/internal/startstop"
)

// claimReturns holds events that this node's writer inserted claimed for its hot path
// but that the hot queue refused when their transaction committed (it filled up in
// between, or the dispatcher was not running). Their claims are released at once, by
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

// returnClaims is the hot path's hand-off of refused pre-claimed events. When the
// dispatcher is not running (the events were claimed before a Stop), it releases their
// claims itself, on the committing goroutine, bounded by StatusTimeout.
func (d *dispatcher) returnClaims(ctx context.Context, events []Event) {
	if !d.q.isAccepting() {
		if d.releaseClaims(ctx, events, whyNotTaken) > 0 && d.notifyOthers != nil {
			d.notifyOthers()
		}
		return
	}
	if over := d.returns.add(events); over > 0 {
		d.log.LogAttrs(ctx, slog.LevelWarn, "too many refused hot-path events waiting for their claims to be released; "+
			"the rest wait for their claims to expire", slog.Int("events", over))
	}
}

// runReturns releases the claims handed over by returnClaims until the run stops, then
// once more for what is left.
func (d *dispatcher) runReturns(r startstop.Run) {
	for {
		select {
		case <-d.returns.wake:
			d.releaseReturned(r.Ctx)
		case <-r.Stopping:
			d.releaseReturned(r.Ctx)
			return
		case <-r.Ctx.Done():
			return
		}
	}
}

func (d *dispatcher) releaseReturned(ctx context.Context) {
	events := d.returns.take()
	if len(events) == 0 {
		return
	}
	if d.releaseClaims(ctx, events, whyNotTaken) == 0 {
		return // rolled back: no row, nothing for a poller to read
	}
	d.q.signalCatchUp()
	if d.notifyOthers != nil {
		d.notifyOthers()
	}
}
