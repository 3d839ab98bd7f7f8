// Package purge deletes finished rows older than their retention, in batches, so that
// the outbox table stays small, and, when asked to (WriterOnly mode), the rows that
// nobody delivered older than theirs.
package purge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/outboxkit/outbox/core/internal/startstop"
	"github.com/outboxkit/outbox/core/storage"
)

// Config configures a [Purger]. Every field holds its final value: package outbox
// translates its Config, defaults included, in one place (core/config.go).
type Config struct {
	// Interval is the time between two runs; the first runs at Start.
	Interval time.Duration
	// Retention is how long finished rows are kept, from done_at (created_at where it
	// is NULL).
	Retention time.Duration
	// DeadRetention, when positive, is the retention of DEAD, FALLBACK and DISCARDED rows
	// instead.
	DeadRetention time.Duration
	// UndeliveredRetention, when positive, is how long undelivered rows (NEW, RETRY,
	// WAITING) are kept, from created_at; zero keeps them until they are delivered.
	UndeliveredRetention time.Duration
	// BatchSize bounds the rows deleted by one statement.
	BatchSize int
	// QueryTimeout bounds each statement. -1 means no timeout.
	QueryTimeout time.Duration
	// Logger receives operational logs, with component=purger.
	Logger *slog.Logger
	// Now returns the current time.
	Now func() time.Time
}

func (c Config) validate() error {
	switch {
	case c.Logger == nil || c.Now == nil:
		return &ConfigError{Field: "Purger", Reason: "Logger and Now are required"}
	case c.Interval < 0:
		return &ConfigError{Field: "Interval", Reason: fmt.Sprintf("must be positive, got %s", c.Interval)}
	case c.Retention < 0:
		return &ConfigError{Field: "Retention", Reason: fmt.Sprintf("must be positive, got %s", c.Retention)}
	case c.DeadRetention < 0:
		return &ConfigError{Field: "PurgeDeadRetention", Reason: fmt.Sprintf("must be positive, got %s", c.DeadRetention)}
	case c.UndeliveredRetention < 0:
		return &ConfigError{Field: "PurgeUndeliveredAfter", Reason: fmt.Sprintf("must be positive, got %s", c.UndeliveredRetention)}
	case c.BatchSize < 1:
		return &ConfigError{Field: "BatchSize", Reason: fmt.Sprintf("must be positive, got %d", c.BatchSize)}
	case c.QueryTimeout < 0 && c.QueryTimeout != -1:
		return &ConfigError{Field: "QueryTimeout", Reason: fmt.Sprintf("must be positive or -1, got %s", c.QueryTimeout)}
	}
	return nil
}

// Purger periodically deletes finished rows older than their retention, in batches,
// so the table stays small. Errors are logged and the next run tries again.
type Purger struct {
	store  storage.Store
	cfg    Config
	log    *slog.Logger
	runner *startstop.Runner
}

// New returns a stopped Purger for store. It returns a [*ConfigError] when store
// is nil or a config value is invalid.
func New(store storage.Store, cfg Config) (*Purger, error) {
	if store == nil {
		return nil, &ConfigError{Field: "Store", Reason: "is nil"}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Purger{
		store:  store,
		cfg:    cfg,
		log:    cfg.Logger.With(slog.String("component", "purger")),
		runner: startstop.New(),
	}, nil
}

// Start starts the purge loop and returns at once: a first run happens immediately,
// then one every Interval until [Purger.Stop]. The loop keeps ctx's values but not its
// deadline or cancellation. Starting a running purger does nothing; a stopped one can be
// started again. Start returns ctx.Err() only when ctx expires while a concurrent Stop
// is in progress.
func (p *Purger) Start(ctx context.Context) error {
	started, err := p.runner.Start(ctx, func(r startstop.Run) {
		r.Go(func() { p.loop(r) })
	})
	if started {
		attrs := []slog.Attr{slog.Duration("interval", p.cfg.Interval), slog.Duration("retention", p.cfg.Retention)}
		if p.cfg.UndeliveredRetention > 0 {
			attrs = append(attrs, slog.Duration("undelivered_retention", p.cfg.UndeliveredRetention))
		}
		p.log.LogAttrs(ctx, slog.LevelDebug, "purger started", attrs...)
	}
	return err
}

// Stop stops the loop; a running purge finishes its current batch. If ctx expires
// first, it cancels the running statement, waits for the loop to return and returns
// ctx.Err(). Stop is idempotent, and a no-op before Start.
func (p *Purger) Stop(ctx context.Context) error {
	stopped, err := p.runner.Stop(ctx, ErrStopped, startstop.StopHooks{})
	if stopped {
		p.log.LogAttrs(ctx, slog.LevelDebug, "purger stopped")
	}
	return err
}

func (p *Purger) loop(r startstop.Run) {
	ticker := time.NewTicker(p.cfg.Interval)
	defer ticker.Stop()
	for {
		// A stop requested during the last run wins over a tick that is ready too
		// (select picks at random among ready cases).
		select {
		case <-r.Stopping:
			return
		default:
		}
		began := time.Now()
		n, err := p.run(r.Ctx, r.Stopping)
		took := slog.Duration("took", time.Since(began))
		switch {
		case err != nil && !errors.Is(err, context.Canceled):
			p.log.LogAttrs(r.Ctx, slog.LevelError, "purge failed",
				slog.Int64("deleted", n), took, slog.String("error", err.Error()))
		case n > 0 && p.cfg.UndeliveredRetention > 0:
			p.log.LogAttrs(r.Ctx, slog.LevelInfo, "purged finished and undelivered events", slog.Int64("deleted", n), took)
		case n > 0:
			p.log.LogAttrs(r.Ctx, slog.LevelInfo, "purged finished events", slog.Int64("deleted", n), took)
		}
		select {
		case <-r.Stopping:
			return
		case <-r.Ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// RunOnce deletes finished rows older than their retention (and, with
// UndeliveredRetention, undelivered rows older than it), batch after batch, until a
// batch deletes fewer than BatchSize rows. It returns how many rows it deleted and,
// when a statement fails, the store's error wrapped.
func (p *Purger) RunOnce(ctx context.Context) (int64, error) { return p.run(ctx, nil) }

// PartitionMaintainer is a store whose table may be partitioned (the SQL store on
// PostgreSQL, package outboxpartition): each run maintains the partitions before it
// purges. MaintainPartitions creates the partitions that cover the time up to cover
// after now, drops the old ones whose rows the purge of p would all delete, and
// returns what it created, dropped and found busy (its lock not had in time); on a
// table that is not partitioned it does nothing.
type PartitionMaintainer interface {
	MaintainPartitions(ctx context.Context, now time.Time, p storage.PurgeParams, cover time.Duration) (created, dropped, busy []string, err error)
}

// run is RunOnce that also stops between batches when stop is closed.
func (p *Purger) run(ctx context.Context, stop <-chan struct{}) (int64, error) {
	now := p.cfg.Now()
	params := storage.PurgeParams{Before: now.Add(-p.cfg.Retention), Limit: p.cfg.BatchSize}
	if p.cfg.DeadRetention > 0 {
		params.DeadBefore = now.Add(-p.cfg.DeadRetention)
	}
	if p.cfg.UndeliveredRetention > 0 {
		params.UndeliveredBefore = now.Add(-p.cfg.UndeliveredRetention)
	}
	if m, ok := p.store.(PartitionMaintainer); ok {
		p.maintain(ctx, m, now, params)
	}
	var total int64
	for {
		n, err := p.purgeBatch(ctx, params)
		total += n
		if err != nil {
			return total, err
		}
		if n < int64(p.cfg.BatchSize) {
			return total, nil
		}
		select {
		case <-stop:
			return total, nil
		default:
		}
	}
}

func (p *Purger) purgeBatch(ctx context.Context, params storage.PurgeParams) (int64, error) {
	if p.cfg.QueryTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.cfg.QueryTimeout)
		defer cancel()
	}
	n, err := p.store.Purge(ctx, params)
	if err != nil {
		return 0, fmt.Errorf("purge: %w", err)
	}
	return n, nil
}

// maintain runs m's partition maintenance, covering two Intervals ahead, so that one
// failed run leaves the writes a partition. A failure is logged: the purge goes on, and
// the next run tries again.
func (p *Purger) maintain(ctx context.Context, m PartitionMaintainer, now time.Time, params storage.PurgeParams) {
	began := time.Now()
	created, dropped, busy, err := m.MaintainPartitions(ctx, now, params, 2*p.cfg.Interval)
	took := slog.Duration("took", time.Since(began))
	switch {
	case err != nil && !errors.Is(err, context.Canceled):
		p.log.LogAttrs(ctx, slog.LevelError, "partition maintenance failed; the next purge tries again",
			slog.Any("created", created), slog.Any("dropped", dropped), took, slog.String("error", err.Error()))
	case len(busy) > 0:
		p.log.LogAttrs(ctx, slog.LevelWarn, "partitions not dropped: their lock was not had in time; the next purge tries again",
			slog.Any("busy", busy), slog.Any("created", created), slog.Any("dropped", dropped), took)
	case len(created) > 0 || len(dropped) > 0:
		p.log.LogAttrs(ctx, slog.LevelInfo, "partitions maintained", slog.Any("created", created), slog.Any("dropped", dropped), took)
	}
}
