package storetest

import (
	"errors"
	"fmt"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// testAuditedChange: each change of ChangeAudited changes what its action names and
// stores its entry with the count; a change of nothing stores no entry with
// OnlyIfChanged; Continue adds to an entry (a replay-all's batches, by filter or by
// ID); bad params are rejected, changing nothing.
func testAuditedChange(x *fixture) {
	as, ok := x.h.Store.(storage.AuditedStore)
	if !ok {
		x.Skipf("%T does not implement storage.AuditedStore", x.h.Store)
	}
	audit, ok := x.h.Store.(storage.AuditStore)
	if !ok {
		x.Fatalf("%T implements storage.AuditedStore but not storage.AuditStore", x.h.Store)
	}
	x.deadSet()
	x.insert(ev("n-1", at(0)))
	entry := func(id, action string) outbox.AuditEntry {
		return outbox.AuditEntry{ID: id, At: at(time.Minute), Actor: "alice", Action: action, Target: "t-" + id}
	}
	change := func(p storage.AuditedChangeParams, want int64) {
		x.Helper()
		n, err := as.ChangeAudited(x.ctx, p)
		x.changed("ChangeAudited "+p.Entry.ID, n, err, want)
	}
	change(storage.AuditedChangeParams{Entry: entry("01A", outbox.AuditReplay), IDs: []string{"x-0", "x-1", "n-1", "missing"}, Now: at(time.Hour)}, 2)
	x.wantStatus("x-0", outbox.StatusNew)
	x.wantStatus("x-1", outbox.StatusNew)
	change(storage.AuditedChangeParams{Entry: entry("01B", outbox.AuditDelete), IDs: []string{"x-2", "n-1"}}, 1)
	x.notFound("x-2")
	change(storage.AuditedChangeParams{Entry: entry("01C", outbox.AuditDiscard), IDs: []string{"x-3", "n-1", "x-done"}, Now: at(time.Hour)}, 2)
	x.wantStatus("x-3", outbox.StatusDiscarded)
	x.wantStatus("n-1", outbox.StatusDiscarded)
	// Nothing to change: no entry with OnlyIfChanged, an entry of 0 without.
	change(storage.AuditedChangeParams{Entry: entry("01D", outbox.AuditReplay), IDs: []string{"x-done"}, Now: at(time.Hour), OnlyIfChanged: true}, 0)
	change(storage.AuditedChangeParams{Entry: entry("01E", outbox.AuditDelete), IDs: []string{"x-done"}}, 0)
	// A replay-all in two batches of one entry: X events of aggregate A (x-first left).
	f := outbox.DeadFilter{EventType: "X"}
	change(storage.AuditedChangeParams{Entry: entry("01F", outbox.AuditReplayAll), DeadFilter: f, Limit: 1, Now: at(time.Hour)}, 1)
	change(storage.AuditedChangeParams{Entry: entry("01F", outbox.AuditReplayAll), DeadFilter: f, Limit: 5, Now: at(time.Hour), Continue: true}, 1)
	change(storage.AuditedChangeParams{Entry: entry("01F", outbox.AuditReplayAll), DeadFilter: f, Limit: 5, Now: at(time.Hour), Continue: true}, 0)
	// A batch of the same replay-all found by its filter and given by ID.
	change(storage.AuditedChangeParams{Entry: entry("01F", outbox.AuditReplayAll), IDs: []string{"y-2", "x-first"}, Now: at(time.Hour), Continue: true}, 1)
	x.wantStatus("x-first", outbox.StatusNew)
	x.wantStatus("xb-1", outbox.StatusNew)
	x.wantStatus("y-2", outbox.StatusNew)
	x.wantStatus("y-1", outbox.StatusDead)

	got, err := audit.ListAudit(x.ctx, storage.ListAuditParams{Limit: 10})
	if err != nil {
		x.Fatal(err)
	}
	var entries []string
	for _, e := range got {
		entries = append(entries, fmt.Sprint(e.ID, " ", e.Action, " ", e.Target, " ", e.Count))
		if e.Actor != "alice" {
			x.Fatalf("entry %+v: actor", e)
		}
		x.wantTime("At", e.At, at(time.Minute))
	}
	want := []string{"01F replay-all t-01F 3", "01E delete t-01E 0", "01C discard t-01C 2", "01B delete t-01B 1", "01A replay t-01A 2"}
	if len(entries) != len(want) {
		x.Fatalf("audit trail %q, want %q", entries, want)
	}
	for i := range want {
		if entries[i] != want[i] {
			x.Fatalf("audit trail %q, want %q", entries, want)
		}
	}

	for _, p := range []storage.AuditedChangeParams{
		{Entry: entry("01G", "purge"), IDs: []string{"y-1"}},
		{Entry: entry("", outbox.AuditDelete), IDs: []string{"y-1"}},
		{Entry: entry("01G", outbox.AuditDelete)},
		{Entry: entry("01G", outbox.AuditReplay), IDs: []string{"y-1"}},
		{Entry: entry("01G", outbox.AuditReplayAll), Limit: 1, IDs: []string{"y-1"}, Now: at(0)},
		{Entry: entry("01G", outbox.AuditReplayAll), Now: at(0)},
		{Entry: entry("01G", outbox.AuditDelete), IDs: []string{"y-1"}, Continue: true},
		{Entry: entry("01G", outbox.AuditDelete), IDs: []string{""}},
	} {
		if n, err := as.ChangeAudited(x.ctx, p); !errors.Is(err, outbox.ErrInvalidArgument) || n != 0 {
			x.Fatalf("ChangeAudited(%+v) = %d, %v; want ErrInvalidArgument", p, n, err)
		}
	}
	x.wantStatus("y-1", outbox.StatusDead)
}
