// Package notify runs a Notifier: it sends coalesced notifications after commits and,
// in the dispatching modes, listens for other processes' and wakes the poller.
package notify

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/outboxkit/outbox/core/internal/startstop"
	"github.com/outboxkit/outbox/core/outboxtype"
)

// Notifier runs an outbox [outboxtype.Notifier]: one goroutine sends coalesced notifications, and in the
// dispatching modes another listens and wakes the poller.
type Notifier struct {
	n       outboxtype.Notifier
	send    chan struct{} // one pending notification at most
	wake    func()        // nil when nothing dispatches here: no listener runs
	timeout time.Duration // bounds one Notify; <= 0 means none
	log     *slog.Logger
	runner  *startstop.Runner
}

// Back-off between two Listen calls after a failure.
const (
	listenRetryMin = 100 * time.Millisecond
	listenRetryMax = 30 * time.Second
)

func New(n outboxtype.Notifier, wake func(), timeout time.Duration, log *slog.Logger) *Notifier {
	return &Notifier{
		n:       n,
		send:    make(chan struct{}, 1),
		wake:    wake,
		timeout: timeout,
		log:     log.With(slog.String("component", "notifier")),
		runner:  startstop.New(),
	}
}

// Signal asks for one notification; it never blocks.
func (s *Notifier) Signal() {
	select {
	case s.send <- struct{}{}:
	default:
	}
}

func (s *Notifier) Start(ctx context.Context) error {
	_, err := s.runner.Start(ctx, func(r startstop.Run) {
		r.Go(func() { s.sendLoop(r) })
		if s.wake != nil {
			r.Go(func() { s.listenLoop(r) })
		}
	})
	return err
}

// Stop sends a notification still pending (within ctx) and stops listening.
func (s *Notifier) Stop(ctx context.Context) error {
	_, err := s.runner.Stop(ctx, outboxtype.ErrStopped, startstop.StopHooks{})
	return err
}

func (s *Notifier) sendLoop(r startstop.Run) {
	for {
		select {
		case <-s.send:
			s.notify(r.Ctx)
		case <-r.Stopping:
			select {
			case <-s.send: // the last writes' notification
				s.notify(r.Ctx)
			default:
			}
			return
		}
	}
}

func (s *Notifier) notify(ctx context.Context) {
	if s.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.timeout)
		defer cancel()
	}
	if err := s.n.Notify(ctx); err != nil && !errors.Is(err, outboxtype.ErrStopped) && !errors.Is(context.Cause(ctx), outboxtype.ErrStopped) {
		s.log.LogAttrs(ctx, slog.LevelWarn, "notify failed; dispatchers will find the events at their next poll",
			slog.String("error", err.Error()))
	}
}

func (s *Notifier) listenLoop(r startstop.Run) {
	ctx, cancel := context.WithCancel(r.Ctx)
	defer cancel()
	r.Go(func() {
		select {
		case <-r.Stopping:
			cancel()
		case <-ctx.Done():
		}
	})
	backoff := listenRetryMin
	for {
		began := time.Now()
		err := s.n.Listen(ctx, s.wake)
		if ctx.Err() != nil {
			return
		}
		if time.Since(began) > listenRetryMax {
			backoff = listenRetryMin // it had been listening for a while
		}
		msg := "notification listener failed; polling until it is back"
		if err == nil {
			msg = "notification listener returned; polling until it is back"
			err = errors.New("returned nil")
		}
		s.log.LogAttrs(ctx, slog.LevelWarn, msg, slog.String("error", err.Error()), slog.Duration("retry_in", backoff))
		s.wake() // notifications may have been missed meanwhile
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, listenRetryMax)
	}
}
