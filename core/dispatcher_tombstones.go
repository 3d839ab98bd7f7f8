package outbox

import "time"

// tombstones remember recently finished events so that the cold path refuses stale
// copies of them: rows a poller read before the outcome was written. A copy is stale
// when its AvailableAt is not after the AvailableAt of the copy that was delivered;
// every later state of the row moves available_at forward (a retry or deferral to its
// due time, a replay to the time of the replay), so fresh copies pass.
//
// Entries live for tombstoneTTL and expire in insertion order, so pruning from the
// front of a FIFO keeps memory bounded by the completions of the last tombstoneTTL.
// Not safe for concurrent use; the dispatcher guards it with its mutex.
type tombstones struct {
	byID map[string]tombstone
	fifo []tombstoneRef
	seq  uint64
}

type tombstone struct {
	availableAt time.Time // AvailableAt of the delivered copy
	expires     time.Time
	seq         uint64
}

type tombstoneRef struct {
	id      string
	seq     uint64
	expires time.Time
}

func newTombstones() tombstones { return tombstones{byID: make(map[string]tombstone)} }

// add records that the copy of id with the given AvailableAt was delivered and its
// outcome written at now.
func (t *tombstones) add(id string, now, availableAt time.Time) {
	t.prune(now)
	t.seq++
	expires := now.Add(tombstoneTTL)
	t.byID[id] = tombstone{availableAt: availableAt, expires: expires, seq: t.seq}
	t.fifo = append(t.fifo, tombstoneRef{id: id, seq: t.seq, expires: expires})
}

// blocks reports whether a copy of id with the given AvailableAt is stale at now.
func (t *tombstones) blocks(id string, availableAt, now time.Time) bool {
	t.prune(now)
	ts, ok := t.byID[id]
	return ok && now.Before(ts.expires) && !availableAt.After(ts.availableAt)
}

// prune drops entries whose TTL has passed.
func (t *tombstones) prune(now time.Time) {
	for len(t.fifo) > 0 && !t.fifo[0].expires.After(now) {
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
