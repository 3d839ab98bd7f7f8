package outbox

import "time"

// tombstones remember recently finished event IDs so that the cold path refuses them
// until a deadline. Entries expire in insertion order after tombstoneTTL at the latest,
// so pruning from the front of a FIFO keeps memory bounded by the completions of the
// last tombstoneTTL. Not safe for concurrent use; the dispatcher guards it with its mutex.
type tombstones struct {
	until map[string]tombstone
	fifo  []tombstoneRef
	seq   uint64
}

type tombstone struct {
	until time.Time
	seq   uint64
}

type tombstoneRef struct {
	id      string
	seq     uint64
	expires time.Time
}

func newTombstones() tombstones { return tombstones{until: make(map[string]tombstone)} }

// add refuses id until until (capped at now+tombstoneTTL).
func (t *tombstones) add(id string, now, until time.Time) {
	t.prune(now)
	if !until.After(now) {
		delete(t.until, id)
		return
	}
	expires := now.Add(tombstoneTTL)
	if until.After(expires) {
		until = expires
	}
	t.seq++
	t.until[id] = tombstone{until: until, seq: t.seq}
	t.fifo = append(t.fifo, tombstoneRef{id: id, seq: t.seq, expires: expires})
}

// blocks reports whether id is refused at now.
func (t *tombstones) blocks(id string, now time.Time) bool {
	t.prune(now)
	ts, ok := t.until[id]
	if !ok {
		return false
	}
	if now.Before(ts.until) {
		return true
	}
	delete(t.until, id)
	return false
}

// prune drops entries whose TTL has passed.
func (t *tombstones) prune(now time.Time) {
	for len(t.fifo) > 0 && !t.fifo[0].expires.After(now) {
		ref := t.fifo[0]
		t.fifo[0] = tombstoneRef{}
		t.fifo = t.fifo[1:]
		if ts, ok := t.until[ref.id]; ok && ts.seq == ref.seq {
			delete(t.until, ref.id)
		}
	}
	if len(t.fifo) == 0 {
		t.fifo = nil
	}
}
