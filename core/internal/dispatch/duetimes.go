package dispatch

import (
	"container/heap"
	"time"
)

// dueTimes is a bounded set of future due times, rounded up to dueGrain so that events
// falling due together wake the poller once. When it holds maxDueTimes, later times are
// not remembered: those events are read by the poller's next regular cycle.
type dueTimes struct {
	h    dueHeap
	seen map[int64]struct{}
}

const (
	dueGrain    = 10 * time.Millisecond
	maxDueTimes = 1024
)

// add remembers t and reports whether it is now the earliest.
func (d *dueTimes) add(t time.Time) bool {
	k := t.UnixNano()
	if r := k % int64(dueGrain); r != 0 {
		k += int64(dueGrain) - r
	}
	if _, ok := d.seen[k]; ok || len(d.h) >= maxDueTimes {
		return false
	}
	if d.seen == nil {
		d.seen = make(map[int64]struct{})
	}
	d.seen[k] = struct{}{}
	heap.Push(&d.h, k)
	return d.h[0] == k
}

func (d *dueTimes) min() (time.Time, bool) {
	if len(d.h) == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, d.h[0]), true
}

// popUntil forgets the times up to now and reports whether it forgot any.
func (d *dueTimes) popUntil(now time.Time) bool {
	n := now.UnixNano()
	popped := false
	for len(d.h) > 0 && d.h[0] <= n {
		delete(d.seen, heap.Pop(&d.h).(int64))
		popped = true
	}
	return popped
}

type dueHeap []int64

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *dueHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
