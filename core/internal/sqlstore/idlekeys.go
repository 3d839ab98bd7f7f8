package sqlstore

import (
	"sync"
	"time"
)

// idleKeys holds what reads outside any writer's transaction saw of keys that had no
// event left that was not DONE, for the store's writers, on the databases whose
// orderStrategy keeps them (keepsIdleKeys).
//
// On MySQL (mysqlOrder) an entry is each key's row version (last_seq, updated_at) at
// that read. A writer of such a key takes the entry instead of reading the key itself
// before its lock (snapshotKeysQuery), one statement fewer in the writer's transaction.
//
// On SQLite (sqliteOrder) an entry is the number the key row carried when the promote
// read the key idle, and a writer of the key inserts its event with one INSERT guarded
// by that number (insertCarriedQuery); a stale entry inserts nothing and the writer
// takes the key upsert. The bounds and the stale share below apply alike.
//
// On MySQL it is safe for the reason the read in the writer's transaction is: that read
// may already predate the lock by as long as the transaction's REPEATABLE READ snapshot
// is old, and what makes it usable is the upsert's check, under the key's lock, that
// the row is still the version the read saw. A row at that version had no write committed
// since the read, and an event leaves the key's open rows (DONE, FALLBACK, DISCARDED)
// but never comes back to them without a write of the key, so the key is still idle.
// An entry that is stale (another process wrote the key since) fails the check: the
// writer inserts its events WAITING and promotes them after commit, as it does for a
// busy key. Entries come from the promote of the keys of finished events
// (promoteIdleQuery), which reads them in the statement that looks for the keys' next
// events, so a key a process delivers and writes again costs its writer no read.
//
// Memory is bounded: at most idleKeysMax entries, and an entry is taken (removed) by the
// write that uses it. When more than a quarter of the entries writers use turn out
// stale (other processes write the same keys), the store stops keeping and using them
// for idleKeysPause (its promotes read no versions meanwhile) and writers read their
// keys themselves, as without it.
type idleKeys struct {
	mu       sync.Mutex
	m        map[string]keySnapshot
	used     int       // entries writers used since the last verdict
	stale    int       // of those, entries whose key had changed
	offUntil time.Time // entries are neither kept nor used before then
	now      func() time.Time
}

const (
	idleKeysMax     = 8192        // entries kept at most
	idleKeysVerdict = 256         // uses between two checks of the stale share
	idleKeysPause   = time.Minute // how long a high stale share turns the entries off
)

func newIdleKeys() *idleKeys {
	return &idleKeys{m: map[string]keySnapshot{}, now: time.Now}
}

// keeping reports whether put keeps entries now (not paused by report): the promote
// reads the idle keys' versions only then.
func (c *idleKeys) keeping() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.now().Before(c.offUntil)
}

// put records that a read saw key idle at version s.
func (c *idleKeys) put(key string, s keySnapshot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.now().Before(c.offUntil) {
		return
	}
	if _, ok := c.m[key]; !ok && len(c.m) >= idleKeysMax {
		for k := range c.m { // any one
			delete(c.m, k)
			break
		}
	}
	c.m[key] = s
}

// take removes and returns the entries of keys, and returns the keys that have none.
func (c *idleKeys) take(keys []keyCount) (map[string]keySnapshot, []keyCount) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) == 0 || c.now().Before(c.offUntil) {
		return nil, keys
	}
	var found map[string]keySnapshot
	var rest []keyCount
	for i, k := range keys {
		s, ok := c.m[k.key]
		if !ok {
			if rest == nil {
				rest = make([]keyCount, 0, len(keys)-i)
			}
			rest = append(rest, k)
			continue
		}
		delete(c.m, k.key)
		if found == nil {
			found = make(map[string]keySnapshot, len(keys)-i)
		}
		found[k.key] = s
	}
	return found, rest
}

// report counts used entries a writer took, of which stale had changed, and turns the
// entries off for idleKeysPause when more than a quarter of the last idleKeysVerdict
// were stale.
func (c *idleKeys) report(used, stale int) {
	if used == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.used += used
	c.stale += stale
	if c.used < idleKeysVerdict {
		return
	}
	if c.stale*4 > c.used {
		c.offUntil = c.now().Add(idleKeysPause)
		clear(c.m)
	}
	c.used, c.stale = 0, 0
}
