package ids

import (
	"testing"
	"time"
)

func TestTimePrefix(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	var g idGenerator // of its own: the shared one never goes back in time
	id := g.next(at)
	if got := TimePrefix(at); got != id[:TimePrefixLen] {
		t.Fatalf("TimePrefix = %s, want the time part of %s", got, id)
	}
	low := TimePrefix(at) + "0000000000000000"
	var g2 idGenerator
	if before := g2.next(at.Add(-time.Millisecond)); before >= low {
		t.Errorf("an ID of the millisecond before, %s, sorts at or after %s", before, low)
	}
	got, ok := Time(id + ".SOMEHASH")
	if !ok || !got.Equal(at) {
		t.Errorf("Time(%s) = %v, %v; want %v", id, got, ok, at)
	}
	for _, bad := range []string{"", "01J0R", "8ZZZZZZZZZ", "01J0ROUNDT", "01j0abcdef", "bare"} {
		if _, ok := Time(bad); ok {
			t.Errorf("Time(%q) reported a time", bad)
		}
	}
}
