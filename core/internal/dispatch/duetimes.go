package dispatch

import (
	"container/heap"
	"time"
)

// dueTimes is a bounded set of future due times, rounded up to dueGrain so that events
// falling due together wake the poller once. It keeps the maxDueTimes earliest: a time
// later than all of them when it is full is not remembered (its events are read by the
// poller's next regular cycle), and an earlier one takes the latest one's place.
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
	if _, ok := d.seen[k]; ok {
		return false
	}
	if len(d.h) >= maxDueTimes {
		last := 0 // the latest time: a leaf of the heap
		for i := len(d.h) / 2; i < len(d.h); i++ {
			if d.h[i] > d.h[last] {
				last = i
			}
		}
		if k >= d.h[last] {
			return false
		}
		delete(d.seen, heap.Remove(&d.h, last).(int64))
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
