package poll

import (
	"sync"
	"time"

	"github.com/outboxkit/outbox/core/storage"
)

// The low-water mark of the poller's reads (SingleNode).
//
// A poll reads the pending index (due time, created_at, event_id) from where it starts
// to its LIMIT. From the head, it walks the entries of every row delivered since the
// database last cleaned the index (on PostgreSQL, the next VACUUM): a DONE row leaves
// its entry there, dead, and at thousands of events a second a walk over them takes
// tens of milliseconds to find a few rows (docs/BENCHMARKS.md, "Soak"). So a cycle
// starts at a low-water mark instead, the due time before which no row is pending,
// and the poller reads from the head only every fullReadEvery, or when it has no mark.
//
// The mark is what the last cycle's first read found: the due time of its first row,
// or, earlier, the cycle's start less SkipRecent and lowWaterMargin. A row that becomes
// pending later is due after that mark, whoever writes it: a write is due from its
// created_at (the writer's clock at the write) or later, a retry from its backoff, a
// replay from the replay, a promoted ordered event from the promote (the store moves
// its due time, storage.OrderStore), and a row that is not due yet is past the mark. Rows
// this does not cover are found by the next read from the head: a transaction that
// commits more than lowWaterMargin after it wrote the row (its created_at is older
// than that at its commit), a writer whose clock is that much behind the poller's, and
// an event written with an AvailableAt in the past. The hot path delivers the events
// of this process's transactions at their commit anyway; what waits for the poller is
// what it missed (a full queue, a crash) and other processes' writes.
//
// A first read that leaves rows out (paused subscriptions, full lanes: storage.Skip)
// or meets undecodable rows sets no mark: the next cycle reads from the head.
//
// A read marks the dead entries it meets, and later reads skip them without visiting
// their rows; so the read from the head costs little when reads from the mark have met
// every entry first. Two things see to that: on PostgreSQL the read from the head walks
// the index the mark's reads walk (the SQL store's pendingQuery), and cycles stay
// Interval apart while the hot path delivers (Poller.loop), so that the marks' windows,
// lowWaterMargin wide, overlap.
//
// MultiNode claims start at a mark too (storage.ClaimParams.DueFrom), from the due
// times of the rows the cycle's first claim took. Rows other nodes hold are left out
// of every claim, and some come back before this node's mark: a dead node's claims
// expire, a node that stops gives back its claims. So claims read from the head every
// claimFullReadEvery, or every ClaimTTL if that is shorter, and those rows wait that
// much longer at most: a dead node's claims are taken again within ClaimTTL plus the
// shorter of ClaimTTL and claimFullReadEvery, and a stopped node's within
// claimFullReadEvery, inside the poller's longest idle wait (DefaultPollMaxInterval,
// 30 s).

// lowWaterMargin is how far behind the cycle's start (less SkipRecent) the mark may
// be: the longest time from a row's write to its commit, plus the clocks' skew, that a
// cycle from the mark still covers.
const lowWaterMargin = 10 * time.Second

// fullReadEvery is how often a cycle reads from the head of the index whatever the
// mark: the longest a row the mark does not cover waits for the poller.
const fullReadEvery = time.Minute

// claimFullReadEvery is fullReadEvery for MultiNode claims, which also look for rows
// that other nodes held (see above).
const claimFullReadEvery = 10 * time.Second

// lowWater is the mark; its methods are safe for concurrent use (Poll may run beside
// the loop).
type lowWater struct {
	every time.Duration // how often a cycle reads from the head; zero: fullReadEvery

	mu     sync.Mutex
	mark   time.Time // rows due before it are not pending; zero: no mark
	fullAt time.Time // when the last cycle from the head began
}

// start returns where a cycle that begins at now reads from: the mark as a cursor, or
// the head (a zero cursor, fromHead set) when there is no mark or the last read from the
// head is w.every old (by now, the poller's clock; a clock that went back reads from
// the head too).
func (w *lowWater) start(now time.Time) (after Cursor, fromHead bool) {
	every := w.every
	if every <= 0 {
		every = fullReadEvery
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mark.IsZero() || w.fullAt.IsZero() || now.Sub(w.fullAt) >= every || now.Before(w.fullAt) {
		w.fullAt = now
		return Cursor{}, true
	}
	return Cursor{AvailableAt: w.mark}, false
}

// forget drops the mark: the next cycle reads from the head.
func (w *lowWater) forget() {
	w.mu.Lock()
	w.mark = time.Time{}
	w.mu.Unlock()
}

// update sets the mark from the first read of a cycle that began at now: its batch,
// read with skip left out, and the poller's SkipRecent (0 when every row is read). The
// batch's earliest due time counts, in whatever order its rows are (a claim's are in
// none).
func (w *lowWater) update(now time.Time, skipRecent time.Duration, skip storage.Skip, batch storage.PendingBatch) {
	var mark time.Time
	if skip.IsZero() && len(batch.Undecodable) == 0 {
		mark = now.Add(-max(skipRecent, 0) - lowWaterMargin)
		for i := range batch.Events {
			if due := batch.Events[i].AvailableAt; due.Before(mark) {
				mark = due
			}
		}
	}
	w.mu.Lock()
	w.mark = mark
	w.mu.Unlock()
}
