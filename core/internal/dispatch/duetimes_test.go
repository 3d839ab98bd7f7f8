package dispatch

import (
	"testing"
	"time"
)

func TestDueTimesKeepTheEarliestWhenFull(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	at := func(i int) time.Time { return base.Add(time.Duration(i) * dueGrain) }
	var d dueTimes
	for i := range maxDueTimes {
		d.add(at(1000 + i)) // far-off times fill the set
	}
	if d.add(at(1000 + maxDueTimes)) {
		t.Fatal("a time later than every remembered one was taken by a full set")
	}
	if !d.add(at(1)) {
		t.Fatal("an earlier time was not remembered by a full set")
	}
	if got, _ := d.min(); !got.Equal(at(1)) {
		t.Fatalf("earliest = %v, want %v", got, at(1))
	}
	if len(d.h) != maxDueTimes || len(d.seen) != maxDueTimes {
		t.Fatalf("size %d/%d, want %d", len(d.h), len(d.seen), maxDueTimes)
	}
	if _, ok := d.seen[at(1000+maxDueTimes-1).UnixNano()]; ok {
		t.Fatal("the latest time was kept instead of the earlier one")
	}
	if !d.popUntil(at(1)) {
		t.Fatal("popUntil forgot nothing")
	}
	if got, _ := d.min(); !got.Equal(at(1000)) {
		t.Fatalf("earliest after pop = %v, want %v", got, at(1000))
	}
}
