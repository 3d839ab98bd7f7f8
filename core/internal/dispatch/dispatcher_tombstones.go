package dispatch

import "time"

// tombstones remember recently finished events so that the cold path refuses stale
// copies of them: rows a poller read before the outcome was written. A copy is stale
// when its read may have begun before the outcome statement returned and its
// AvailableAt is not after the AvailableAt of the copy that was delivered. A read that
// began strictly after the statement returned (clocks are coarse on some systems) sees
// the row's later state, so it is never refused. For the others the AvailableAt rule
// decides: a retry or deferral moves available_at forward to its due time, and a replay
// to the time of the replay by the replaying process's clock, which may be behind this
// one; a replay it refuses is accepted at the poller's next read.
//
// A stale copy can only come from a read that began before the outcome was written and
// is still open (Queues.BeginRead): the poller enqueues a batch's rows before it closes
// the batch's read, and a write's read stays open until its after-commit hook has handed
// the events to the hot path. So an entry is kept only while a read that began before
// it was settled is open: none is added when no read is open, and pruning from the front
// of the FIFO drops entries settled before the oldest open read began. Memory is bounded
// by the completions during one read (a poll query is bounded by QueryTimeout), and in
// any case by those of the last tombstoneTTL, the most an entry lives. Not safe for
// concurrent use; the Dispatcher guards it with its mutex.
type tombstones struct {
	byID map[string]tombstone
	fifo []tombstoneRef
	seq  uint64
}

type tombstone struct {
	availableAt time.Time // AvailableAt of the delivered copy
	settled     time.Time // when the outcome statement returned
	expires     time.Time
	seq         uint64
}

type tombstoneRef struct {
	id      string
	seq     uint64
	expires time.Time
}

func newTombstones() tombstones { return tombstones{byID: make(map[string]tombstone)} }

// add records that the copy of id with the given AvailableAt was delivered and that
// the statement writing its outcome returned at now.
func (t *tombstones) add(id string, now, availableAt time.Time) {
	t.seq++
	expires := now.Add(tombstoneTTL)
	t.byID[id] = tombstone{availableAt: availableAt, settled: now, expires: expires, seq: t.seq}
	t.fifo = append(t.fifo, tombstoneRef{id: id, seq: t.seq, expires: expires})
}

// blocks reports whether a copy of id with the given AvailableAt is stale at now.
// readAt is when the read that returned the copy began; the zero time means unknown
// (the hot path, or an event handed to EnqueueCold), and only AvailableAt decides.
func (t *tombstones) blocks(id string, availableAt, readAt, now time.Time) bool {
	ts, ok := t.byID[id]
	if !ok || !now.Before(ts.expires) {
		return false
	}
	if readAt.After(ts.settled) { // began after the outcome was written (zero never is)
		return false
	}
	return !availableAt.After(ts.availableAt)
}

// prune drops entries whose TTL has passed and, from the front, those that no open read
// needs: all when open is false, else those settled before oldestRead. Entries are added
// in settlement order, so the front is the oldest.
func (t *tombstones) prune(now, oldestRead time.Time, open bool) {
	for len(t.fifo) > 0 && (!t.fifo[0].expires.After(now) || !open || t.settledBefore(t.fifo[0], oldestRead)) {
		ref := t.fifo[0]
		t.fifo[0] = tombstoneRef{}
		t.fifo = t.fifo[1:]
		if ts, ok := t.byID[ref.id]; ok && ts.seq == ref.seq {
			delete(t.byID, ref.id)
		}
	}
	if len(t.fifo) == 0 {
		t.fifo = nil
	}
}

// settledBefore reports whether ref's entry was settled before at (an entry replaced by
// a later add counts as settled then: it is dropped when that one is).
func (t *tombstones) settledBefore(ref tombstoneRef, at time.Time) bool {
	ts, ok := t.byID[ref.id]
	if !ok || ts.seq != ref.seq {
		return true // superseded: nothing to keep for this slot
	}
	return ts.settled.Before(at)
}
