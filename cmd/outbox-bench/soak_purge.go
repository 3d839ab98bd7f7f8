package main

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// purgeTap is a slog.Handler that passes every record on to next and adds up the
// purge runs the outbox logs ("purged finished events": the rows deleted and the time
// the run took), so that the soak reports what the purge costs per row, and, on a
// partitioned table, the partitions the purger dropped ("partitions maintained").
type purgeTap struct {
	next  slog.Handler
	runs  *atomic.Int64
	rows  *atomic.Int64
	nanos *atomic.Int64
	// dropped and dropNanos add up "partitions maintained": the partitions dropped,
	// and the time those runs of the maintenance took.
	dropped   *atomic.Int64
	dropNanos *atomic.Int64
}

func newPurgeTap(next slog.Handler) *purgeTap {
	return &purgeTap{next: next, runs: new(atomic.Int64), rows: new(atomic.Int64), nanos: new(atomic.Int64),
		dropped: new(atomic.Int64), dropNanos: new(atomic.Int64)}
}

// Enabled takes the purge's INFO records whatever next's level.
func (h *purgeTap) Enabled(ctx context.Context, l slog.Level) bool {
	return l == slog.LevelInfo || h.next.Enabled(ctx, l)
}

func (h *purgeTap) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "purged finished events" {
		var rows int64
		var took time.Duration
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "deleted":
				rows = a.Value.Int64()
			case "took":
				took = a.Value.Duration()
			}
			return true
		})
		h.runs.Add(1)
		h.rows.Add(rows)
		h.nanos.Add(int64(took))
	}
	if r.Message == "partitions maintained" {
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "dropped":
				if names, ok := a.Value.Any().([]string); ok {
					h.dropped.Add(int64(len(names)))
				}
			case "took":
				h.dropNanos.Add(int64(a.Value.Duration()))
			}
			return true
		})
	}
	if !h.next.Enabled(ctx, r.Level) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

func (h *purgeTap) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.next = h.next.WithAttrs(as)
	return &c
}

func (h *purgeTap) WithGroup(name string) slog.Handler {
	c := *h
	c.next = h.next.WithGroup(name)
	return &c
}

// purgeTotals are the purge runs a soak saw: how many, the rows they deleted and the
// time they took (each run's statements, one after the other, on the outbox's pool while
// the producers write).
type purgeTotals struct {
	Runs   int64   `json:"runs"`
	Rows   int64   `json:"rows"`
	Millis float64 `json:"ms"`
	// PartitionsDropped and DropMillis are a partitioned table's: the partitions the
	// purger dropped, and the time its maintenance runs that created or dropped one took.
	PartitionsDropped int64   `json:"partitions_dropped,omitempty"`
	DropMillis        float64 `json:"partition_maintenance_ms,omitempty"`
}

// totals reads h's sums.
func (h *purgeTap) totals() purgeTotals {
	return purgeTotals{Runs: h.runs.Load(), Rows: h.rows.Load(), Millis: float64(h.nanos.Load()) / 1e6,
		PartitionsDropped: h.dropped.Load(), DropMillis: float64(h.dropNanos.Load()) / 1e6}
}

// MicrosPerRow is the purge's time per row deleted, 0 when it deleted none.
func (t purgeTotals) MicrosPerRow() float64 {
	if t.Rows == 0 {
		return 0
	}
	return t.Millis * 1000 / float64(t.Rows)
}
