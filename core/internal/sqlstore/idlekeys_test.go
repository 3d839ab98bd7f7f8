package sqlstore

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

func TestIdleKeysTakeRemovesWhatItReturns(t *testing.T) {
	t.Parallel()
	c := newIdleKeys()
	c.put("A", keySnapshot{seq: 3, at: 30})
	c.put("C", keySnapshot{seq: 1, at: 10})
	c.put("C", keySnapshot{seq: 2, at: 20}) // a later read replaces an earlier one
	got, rest := c.take([]keyCount{{"A", 1}, {"B", 2}, {"C", 1}})
	want := map[string]keySnapshot{"A": {seq: 3, at: 30}, "C": {seq: 2, at: 20}}
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(rest, []keyCount{{"B", 2}}) {
		t.Fatalf("take = %v, %v; want %v, [{B 2}]", got, rest, want)
	}
	// Taken entries are gone: a second writer of the same keys reads them itself.
	got, rest = c.take([]keyCount{{"A", 1}, {"C", 1}})
	if got != nil || len(rest) != 2 {
		t.Fatalf("second take = %v, %v; want nothing cached", got, rest)
	}
	// No entry at all, and every key has one.
	if got, rest := newIdleKeys().take([]keyCount{{"A", 1}}); got != nil || len(rest) != 1 {
		t.Fatalf("take from an empty cache = %v, %v", got, rest)
	}
	c.put("D", keySnapshot{seq: 1})
	if got, rest := c.take([]keyCount{{"D", 1}}); len(got) != 1 || rest != nil {
		t.Fatalf("take of a cached key = %v, %v; want it and no rest", got, rest)
	}
}

func TestIdleKeysStayBounded(t *testing.T) {
	t.Parallel()
	c := newIdleKeys()
	for i := range idleKeysMax + 100 {
		c.put(fmt.Sprint("K", i), keySnapshot{seq: int64(i)})
	}
	if n := len(c.m); n != idleKeysMax {
		t.Fatalf("%d entries after %d puts, want the bound %d", n, idleKeysMax+100, idleKeysMax)
	}
	// The newest entry is always kept: only another key makes room.
	last := fmt.Sprint("K", idleKeysMax+99)
	if got, _ := c.take([]keyCount{{last, 1}}); len(got) != 1 {
		t.Fatalf("the last key put is not cached")
	}
}

// Entries that turn out stale (other processes write the keys) more than a quarter of
// the time turn the cache off for idleKeysPause, then it works again.
func TestIdleKeysPauseWhenMostlyStale(t *testing.T) {
	t.Parallel()
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	c := newIdleKeys()
	c.now = func() time.Time { return now }
	if !c.keeping() {
		t.Fatal("a new cache is not keeping entries")
	}
	// A quarter stale exactly is tolerated.
	c.report(idleKeysVerdict, idleKeysVerdict/4)
	c.put("A", keySnapshot{seq: 1})
	if got, _ := c.take([]keyCount{{"A", 1}}); len(got) != 1 {
		t.Fatal("cache off after a quarter of stale entries")
	}
	c.put("A", keySnapshot{seq: 1})
	c.report(idleKeysVerdict/2, idleKeysVerdict/4)
	c.report(idleKeysVerdict/2, 1) // the verdict: 65 stale of 256 uses, more than a quarter
	if got, rest := c.take([]keyCount{{"A", 1}}); got != nil || len(rest) != 1 {
		t.Fatalf("take while off = %v, %v; want nothing (the entries are dropped)", got, rest)
	}
	c.put("B", keySnapshot{seq: 1})
	if len(c.m) != 0 || c.keeping() {
		t.Fatalf("while off: %d entries kept, keeping %v", len(c.m), c.keeping())
	}
	now = now.Add(idleKeysPause)
	if !c.keeping() {
		t.Fatal("not keeping after the pause")
	}
	c.put("B", keySnapshot{seq: 1})
	if got, _ := c.take([]keyCount{{"B", 1}}); len(got) != 1 {
		t.Fatal("cache still off after the pause")
	}
}
