package ids

import (
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestEncodeULIDKnownValues(t *testing.T) {
	t.Parallel()
	var zero [16]byte
	if got := EncodeULID(zero); got != "00000000000000000000000000" {
		t.Fatalf("zero: got %s", got)
	}
	var ones [16]byte
	for i := range ones {
		ones[i] = 0xff
	}
	if got := EncodeULID(ones); got != "7ZZZZZZZZZZZZZZZZZZZZZZZZZ" {
		t.Fatalf("max: got %s", got)
	}
	// Timestamp only: 1 ms is the last character of the 10-character time part.
	var ts [16]byte
	putUint48(ts[:6], 1)
	if got := EncodeULID(ts); got[:10] != "0000000001" || strings.Trim(got[10:], "0") != "" {
		t.Fatalf("1ms: got %s", got)
	}
}

func TestIDsAreMonotonicWithinAMillisecond(t *testing.T) {
	t.Parallel()
	var g idGenerator
	now := time.UnixMilli(1_700_000_000_000)
	prev := ""
	for i := range 10_000 {
		id := g.next(now)
		if len(id) != 26 {
			t.Fatalf("len %d", len(id))
		}
		if id <= prev {
			t.Fatalf("id %d not increasing: %s <= %s", i, id, prev)
		}
		prev = id
	}
	// A clock that steps back still yields increasing IDs.
	if id := g.next(now.Add(-time.Hour)); id <= prev {
		t.Fatalf("clock step back broke order: %s <= %s", id, prev)
	}
}

func TestIncrementCarriesIntoTime(t *testing.T) {
	t.Parallel()
	var g idGenerator
	g.lastMs = 5
	for i := range g.rnd {
		g.rnd[i] = 0xff
	}
	g.increment()
	if g.lastMs != 6 {
		t.Fatalf("lastMs = %d, want 6", g.lastMs)
	}
}

func TestNewIDConcurrentUniqueAndSorted(t *testing.T) {
	t.Parallel()
	const n, workers = 2000, 8
	ids := make([][]string, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range n {
				ids[w] = append(ids[w], New())
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, list := range ids {
		if !sort.StringsAreSorted(list) {
			t.Fatal("one goroutine's IDs are not sorted")
		}
		for _, id := range list {
			if seen[id] {
				t.Fatalf("duplicate %s", id)
			}
			seen[id] = true
		}
	}
}

func BenchmarkNewID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = New()
	}
}
