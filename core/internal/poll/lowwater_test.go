package poll

import (
	"errors"
	"testing"
	"time"

	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// TestLowWaterMark: the mark is the first row's due time, or the cycle's start less
// SkipRecent and the margin if that is earlier; a read that left rows out or met an
// undecodable row sets none, and so does a clock that went back or a minute without a
// read from the head.
func TestLowWaterMark(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	row := func(due time.Time) storage.PendingBatch {
		return storage.PendingBatch{Events: []outboxtype.Event{{ID: "e", AvailableAt: due, CreatedAt: due}}}
	}
	var w lowWater
	if after, head := w.start(now); !head || !after.IsZero() {
		t.Fatalf("without a mark: start %+v, from the head %v", after, head)
	}
	cases := []struct {
		name  string
		skip  storage.Skip
		batch storage.PendingBatch
		want  time.Time
	}{
		{"no rows", storage.Skip{}, storage.PendingBatch{}, now.Add(-time.Second - lowWaterMargin)},
		{"an old row", storage.Skip{}, row(now.Add(-time.Hour)), now.Add(-time.Hour)},
		{"a recent row", storage.Skip{}, row(now.Add(-time.Second)), now.Add(-time.Second - lowWaterMargin)},
		{"rows left out", storage.Skip{Listeners: []string{"paused"}}, row(now.Add(-time.Hour)), time.Time{}},
		{"an undecodable row", storage.Skip{}, storage.PendingBatch{Undecodable: []outboxtype.RowError{{EventID: "x", Err: errors.New("bad")}}}, time.Time{}},
	}
	for _, c := range cases {
		w.update(now, time.Second, c.skip, c.batch)
		after, head := w.start(now.Add(time.Second))
		if c.want.IsZero() {
			if !head || !after.IsZero() {
				t.Errorf("%s: start %+v, from the head %v; want from the head", c.name, after, head)
			}
			w.fullAt = now // as if this read were from the head
			continue
		}
		if head || !after.AvailableAt.Equal(c.want) || !after.CreatedAt.IsZero() || after.ID != "" {
			t.Errorf("%s: start %+v, from the head %v; want from %v", c.name, after, head, c.want)
		}
	}
	w.update(now, time.Second, storage.Skip{}, storage.PendingBatch{})
	if _, head := w.start(now.Add(-time.Millisecond)); !head {
		t.Error("a clock that went back: not from the head")
	}
	w.update(now, time.Second, storage.Skip{}, storage.PendingBatch{})
	if _, head := w.start(now.Add(-time.Millisecond).Add(fullReadEvery)); !head {
		t.Error("a minute after the last read from the head: not from the head")
	}
	w.update(now, time.Second, storage.Skip{}, storage.PendingBatch{})
	if _, head := w.start(w.fullAt.Add(fullReadEvery / 2)); head {
		t.Error("half a minute after the read from the head: from the head again")
	}
}

func TestHotInterval(t *testing.T) {
	s := time.Second
	for _, c := range []struct {
		elapsed   time.Duration
		delivered uint64
		want      time.Duration
	}{
		{5 * s, 7500, 666666666},                // 1,500/s: 1,000 events take 2/3 s
		{5 * s, 500, 5 * s},                     // fewer than 1,000 an interval: the interval
		{5 * s, 1000, 5 * s},                    // exactly 1,000
		{5 * s, 100000, 500 * time.Millisecond}, // 20,000/s: a tenth of the interval at least
		{5 * s, 0, 5 * s},
		{0, 100, 5 * s},
		{30 * s, 3000, 5 * s}, // after a long idle wait: at most the interval
	} {
		if got := hotInterval(5*s, c.elapsed, c.delivered); got != c.want {
			t.Errorf("hotInterval(5s, %v, %d) = %v, want %v", c.elapsed, c.delivered, got, c.want)
		}
	}
}
