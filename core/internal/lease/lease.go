// Package lease keeps the table's dispatch lease, so that two SingleNode processes, or
// a SingleNode process beside MultiNode ones, never dispatch from one table at once.
package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/outboxkit/outbox/core/internal/dispatch"
	"github.com/outboxkit/outbox/core/internal/ids"
	"github.com/outboxkit/outbox/core/internal/startstop"
	"github.com/outboxkit/outbox/core/storage"
)

// The dispatch lease. Two SingleNode processes on one table would both deliver every
// event their pollers find, and a SingleNode process beside MultiNode ones ignores
// their claims; a Kubernetes Deployment with two replicas, or a rolling update of one,
// starts exactly that. So a dispatching process holds a lease in the database
// (LeaseStore): a SingleNode process alone, MultiNode processes together. A process that
// cannot take it does not fail to start, since during a rolling update the new process
// starts before the old one stops, and a process that refused to start would stall the
// update: it stands by instead, writing events (their rows wait in the table for the
// holder's poller) but delivering none, tries again every LeaseTTL/6, and starts
// delivering once it has the lease: when the holder stops (Stop releases the lease) or
// its lease expires (a crash). It logs a WARN when it begins to stand by and an ERROR
// naming the fix when it still stands by after four LeaseTTLs, which no rolling update
// explains. docs/modes.md has the whole story.

// MinTTL is the shortest Config.LeaseTTL: the lease is renewed every third of it.
const MinTTL = time.Second

// The lease's timing, in fractions of its TTL T. A holder renews every T/3 and, after
// a failed renewal, tries again every T/12; when none succeeded for 2T/3 since the last
// successful one was sent, it stops delivering, a hard stop by T after that renewal, so
// that it has stopped before another process can take the lease. A process standing
// by tries to take the lease every T/6 and logs an ERROR after 4T.
const (
	leaseRenewDiv    = 3
	leaseRetryDiv    = 12
	leaseStandbyDiv  = 6
	leaseErrorAfterN = 4
)

// Leased runs the dispatcher and the poller of a SingleNode or MultiNode Outbox while
// its process holds the dispatch lease, and keeps the lease: Outbox.Start starts it in
// their place. Without a lease store (a store that is not a [storage.LeaseStore], LeaseTTL -1,
// or a table without the lease version) it runs them unconditionally, as before.
type Leased struct {
	store  storage.LeaseStore  // nil: no lease
	parts  []startstop.Service // the pause set's read, the dispatcher, then the poller
	hot    *dispatch.HotPath   // nil without a hot path: told when this process stands by
	shared bool                // MultiNode: the processes hold the lease together
	ttl    time.Duration
	nodeID string // the holder in MultiNode mode; SingleNode draws one per Start
	log    *slog.Logger

	// dispatching is true while the parts run; Outbox.Dispatching reads it.
	dispatching atomic.Bool

	// Set by Start, then owned by the loop until Stop has waited for it.
	holder       string
	unleased     bool // running without a lease
	cancel       context.CancelFunc
	done         chan struct{}
	renewedAt    time.Time // when the last successful acquisition or renewal was sent
	failing      bool      // the last renewal failed
	standbySince time.Time // zero while dispatching
	errorLogged  bool      // the standby's ERROR was logged
}

// Config configures a [Leased].
type Config struct {
	// Store keeps the lease; nil runs the parts without one.
	Store storage.LeaseStore
	// Parts are what runs while this process holds the lease, started in order: the
	// pause set's read, the dispatcher, then the poller.
	Parts []startstop.Service
	// Hot is this process's hot path, told when the process stands by; nil without one.
	Hot *dispatch.HotPath
	// Shared is true in MultiNode mode: the processes hold the lease together.
	Shared bool
	TTL    time.Duration
	// NodeID is the holder in MultiNode mode; a SingleNode process draws one per Start.
	NodeID string
	Logger *slog.Logger
}

// New returns the stopped keeper of the dispatch lease.
func New(cfg Config) *Leased {
	return &Leased{store: cfg.Store, parts: cfg.Parts, hot: cfg.Hot, shared: cfg.Shared, ttl: cfg.TTL,
		nodeID: cfg.NodeID, log: cfg.Logger.With(slog.String("component", "lease"))}
}

// Dispatching reports whether the parts run: this process holds the lease, or runs
// without one.
func (l *Leased) Dispatching() bool { return l.dispatching.Load() }

// Start takes the lease and starts the parts, or stands by when another process holds
// it, and starts the loop that keeps the lease. It fails when the lease cannot be read
// (the database) or a part fails to start.
func (l *Leased) Start(ctx context.Context) error {
	if l.done != nil {
		return nil
	}
	l.unleased, l.failing, l.errorLogged, l.standbySince = l.store == nil, false, false, time.Time{}
	if l.unleased {
		return l.startParts(ctx)
	}
	l.holder = l.nodeID
	if !l.shared {
		l.holder = ids.DefaultNodeID() // a new holder per start: a restart after a hard stop waits
	}
	sent := time.Now()
	lease, err := l.store.AcquireLease(ctx, l.params())
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		l.log.LogAttrs(ctx, slog.LevelWarn, "the table has no dispatch lease: a second process dispatching from it "+
			"is not detected until outbox.MigrateTable adds the lease table (docs/modes.md)", slog.String("error", err.Error()))
		l.unleased = true
		return l.startParts(ctx)
	case err != nil:
		return fmt.Errorf("dispatch lease: %w", err)
	case lease.Held:
		if err := l.startParts(ctx); err != nil {
			l.release(ctx)
			return err
		}
		l.renewedAt = sent
	default:
		l.standBy(ctx, lease)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.cancel, l.done = cancel, make(chan struct{})
	go l.loop(runCtx, l.done)
	return nil
}

// Stop stops the loop and the parts, then releases a SingleNode lease, unless the parts'
// stop passed ctx's deadline: attempts it abandoned may still run, so the lease is left
// to expire.
func (l *Leased) Stop(ctx context.Context) error {
	if l.done != nil {
		l.cancel()
		<-l.done
		l.done = nil
	}
	if !l.dispatching.Load() {
		if l.hot != nil {
			l.hot.SetStandby(false)
		}
		return nil
	}
	err := startstop.StopAll(ctx, l.parts)
	l.dispatching.Store(false)
	if l.unleased {
		return err
	}
	if err != nil {
		l.log.LogAttrs(ctx, slog.LevelInfo, "dispatch lease left to expire: the stop abandoned running attempts",
			slog.Duration("lease_ttl", l.ttl))
		return err
	}
	l.release(ctx)
	return nil
}

// params are the lease parameters of this process.
func (l *Leased) params() storage.LeaseParams {
	return storage.LeaseParams{Holder: l.holder, Shared: l.shared, TTL: l.ttl}
}

// release ends a SingleNode lease (MultiNode processes share theirs: it expires).
func (l *Leased) release(ctx context.Context) {
	if l.shared || l.unleased {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.ttl/leaseRenewDiv)
	defer cancel()
	if err := l.store.ReleaseLease(rctx, l.holder); err != nil {
		l.log.LogAttrs(ctx, slog.LevelWarn, "dispatch lease not released: another process takes it when it expires",
			slog.String("error", err.Error()), slog.Duration("lease_ttl", l.ttl))
	}
}

// startParts starts the dispatcher and the poller; on an error it stops what started.
func (l *Leased) startParts(ctx context.Context) error {
	for i, s := range l.parts {
		if err := s.Start(ctx); err != nil {
			_ = startstop.StopAll(context.WithoutCancel(ctx), l.parts[:i])
			return err
		}
	}
	if l.hot != nil {
		l.hot.SetStandby(false)
	}
	l.dispatching.Store(true)
	l.standbySince = time.Time{}
	return nil
}

// stopParts stops the parts by deadline (a hard stop after it) and stands by.
func (l *Leased) stopParts(ctx context.Context, deadline time.Time) {
	if l.hot != nil {
		l.hot.SetStandby(true)
	}
	sctx, cancel := context.WithDeadline(ctx, deadline) // Outbox.Stop cancels ctx: a hard stop
	defer cancel()
	_ = startstop.StopAll(sctx, l.parts)
	l.dispatching.Store(false)
}

// standBy begins to stand by beside holder's lease.
func (l *Leased) standBy(ctx context.Context, lease storage.Lease) {
	if l.hot != nil {
		l.hot.SetStandby(true)
	}
	l.standbySince, l.errorLogged = time.Now(), false
	l.log.LogAttrs(ctx, slog.LevelWarn, "another process holds this table's dispatch lease: this one writes events but "+
		"delivers none until the lease is free. During a rolling update that is expected and brief; an ERROR follows "+
		"if it lasts. "+leaseFix(l.shared, lease.Shared), l.leaseAttrs(lease)...)
}

// leaseFix names the fix for processes of this mode (shared: MultiNode) beside a lease
// held by processes of another (heldShared: MultiNode).
func leaseFix(shared, heldShared bool) string {
	switch {
	case !shared && !heldShared:
		return "Processes that dispatch from one table together must all run Mode: MultiNode with a ClaimTTL " +
			"and a NodeID each (docs/multinode.md); a process that only writes runs Mode: WriterOnly."
	case !shared:
		return "MultiNode processes dispatch from this table: run this one with Mode: MultiNode, a ClaimTTL and " +
			"a NodeID too (docs/multinode.md), or with Mode: WriterOnly."
	default:
		return "A SingleNode process dispatches from this table: stop it, or run it with Mode: MultiNode, a " +
			"ClaimTTL and a NodeID like this one (docs/multinode.md)."
	}
}

func (l *Leased) leaseAttrs(lease storage.Lease) []slog.Attr {
	return []slog.Attr{slog.String("mode", modeName(l.shared)), slog.String("holder", lease.Holder),
		slog.String("holder_mode", modeName(lease.Shared)), slog.Time("expires_at", lease.ExpiresAt),
		slog.Duration("lease_ttl", l.ttl)}
}

// loop keeps the lease until ctx ends.
func (l *Leased) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	timer := time.NewTimer(l.wait())
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		if l.dispatching.Load() {
			l.renew(ctx)
		} else {
			l.tryTake(ctx)
		}
		timer.Reset(l.wait())
	}
}

// wait is the time until the loop's next attempt.
func (l *Leased) wait() time.Duration {
	switch {
	case !l.dispatching.Load():
		return l.ttl / leaseStandbyDiv
	case l.failing:
		return l.ttl / leaseRetryDiv
	default:
		return max(0, time.Until(l.renewedAt.Add(l.ttl/leaseRenewDiv)))
	}
}

// acquire runs one attempt, bounded by a third of the TTL.
func (l *Leased) acquire(ctx context.Context) (storage.Lease, error) {
	actx, cancel := context.WithTimeout(ctx, l.ttl/leaseRenewDiv)
	defer cancel()
	return l.store.AcquireLease(actx, l.params())
}

// renew renews the lease of a dispatching process; it stops the parts when the lease
// is lost, or when it could not be renewed for two thirds of the TTL.
func (l *Leased) renew(ctx context.Context) {
	sent := time.Now()
	lease, err := l.acquire(ctx)
	switch {
	case ctx.Err() != nil:
		return // Stop
	case err == nil && lease.Held:
		l.renewedAt, l.failing = sent, false
	case err == nil:
		// Another process took it: this one's lease expired unrenewed (a pause of the
		// process, or the database unreachable, for longer than LeaseTTL). Stop at once.
		l.log.LogAttrs(ctx, slog.LevelError, "lost this table's dispatch lease to another process: stopped delivering "+
			"and standing by. The lease expired unrenewed (this process paused, or could not reach the database, for "+
			"longer than LeaseTTL); if processes keep taking it from each other, two of them run beside each other. "+
			leaseFix(l.shared, lease.Shared), l.leaseAttrs(lease)...)
		l.stopParts(ctx, time.Now())
		l.standbySince, l.errorLogged = time.Now(), true
	default:
		l.failing = true
		since := time.Since(l.renewedAt)
		if since < l.ttl*2/leaseRenewDiv {
			l.log.LogAttrs(ctx, slog.LevelWarn, "dispatch lease renewal failed; trying again",
				slog.String("error", err.Error()), slog.Duration("since_renewed", since.Round(time.Millisecond)))
			return
		}
		l.log.LogAttrs(ctx, slog.LevelError, "could not renew this table's dispatch lease for two thirds of LeaseTTL: "+
			"stopping delivery before it expires, so that no other process delivers beside this one; delivery resumes "+
			"when the lease is renewed", slog.String("error", err.Error()), slog.Duration("since_renewed", since.Round(time.Millisecond)),
			slog.Duration("lease_ttl", l.ttl))
		l.stopParts(ctx, l.renewedAt.Add(l.ttl))
		l.standbySince, l.errorLogged = time.Now(), true
	}
}

// tryTake tries to take the lease for a process standing by, and starts the parts when
// it did.
func (l *Leased) tryTake(ctx context.Context) {
	sent := time.Now()
	lease, err := l.acquire(ctx)
	switch {
	case ctx.Err() != nil:
		return
	case err != nil:
		l.log.LogAttrs(ctx, slog.LevelWarn, "dispatch lease: attempt to take it failed; trying again",
			slog.String("error", err.Error()))
	case lease.Held:
		waited := time.Since(l.standbySince)
		if err := l.startParts(ctx); err != nil {
			l.log.LogAttrs(ctx, slog.LevelError, "took the dispatch lease but could not start delivering; releasing it",
				slog.String("error", err.Error()))
			l.release(ctx)
			return
		}
		l.renewedAt, l.failing = sent, false
		l.log.LogAttrs(ctx, slog.LevelInfo, "took this table's dispatch lease: delivering",
			slog.String("mode", modeName(l.shared)), slog.Duration("stood_by", waited.Round(time.Millisecond)))
	case !l.errorLogged && time.Since(l.standbySince) >= leaseErrorAfterN*l.ttl:
		l.errorLogged = true
		l.log.LogAttrs(ctx, slog.LevelError, fmt.Sprintf("still standing by after %s: another process keeps this "+
			"table's dispatch lease, so this one delivers nothing. ", time.Since(l.standbySince).Round(time.Second))+
			leaseFix(l.shared, lease.Shared), l.leaseAttrs(lease)...)
	}
}

// modeName names the mode of processes that hold a lease shared or alone.
func modeName(shared bool) string {
	if shared {
		return "MultiNode"
	}
	return "SingleNode"
}
