package storetest

import (
	"errors"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// testPause: SetPaused keeps the pause set (a second pause or resume changes nothing),
// records its audit entry with the count; Pending and Claim leave out the rows of the
// paused listeners named in their params, never a row without a listener; Pin writes the
// listener of pending rows that have none and clears their claim, fenced by the token;
// bad params are rejected.
func testPause(x *fixture) {
	ps, ok := x.h.Store.(storage.PauseStore)
	if !ok {
		x.Skipf("%T does not implement storage.PauseStore", x.h.Store)
	}
	list := func() []string {
		x.Helper()
		got, err := ps.Paused(x.ctx)
		if err != nil {
			x.Fatalf("Paused: %v", err)
		}
		var names []string
		for _, p := range got {
			names = append(names, p.Listener)
			if p.At.IsZero() || p.Actor != "alice" {
				x.Fatalf("pause %+v: want a time and actor alice", p)
			}
			if p.Listener == "mail" && p.Reason != "smtp down" {
				x.Fatalf("pause %+v: want reason %q", p, "smtp down")
			}
		}
		return names
	}
	set := func(id, listener string, pause bool, want bool) {
		x.Helper()
		action := outbox.AuditResume
		if pause {
			action = outbox.AuditPause
		}
		reason := ""
		if pause && listener == "mail" {
			reason = "smtp down"
		}
		changed, err := ps.SetPaused(x.ctx, storage.SetPausedParams{Listener: listener, Pause: pause, Reason: reason,
			Entry: outbox.AuditEntry{ID: id, At: at(time.Minute), Actor: "alice", Action: action, Target: listener}})
		if err != nil || changed != want {
			x.Fatalf("SetPaused(%s, %v) = %v, %v; want %v", listener, pause, changed, err, want)
		}
	}
	if got := list(); len(got) != 0 {
		x.Fatalf("Paused on a new table: %q", got)
	}
	set("01A", "mail", true, true)
	set("01B", "mail", true, false)
	set("01C", "search", true, true)
	if got := list(); len(got) != 2 || got[0] != "mail" || got[1] != "search" {
		x.Fatalf("Paused: %q, want mail and search", got)
	}
	set("01D", "search", false, true)
	set("01E", "search", false, false)
	if got := list(); len(got) != 1 || got[0] != "mail" {
		x.Fatalf("Paused after resuming search: %q, want mail", got)
	}
	if audit, ok := x.h.Store.(storage.AuditStore); ok {
		got, err := audit.ListAudit(x.ctx, storage.ListAuditParams{Limit: 10})
		if err != nil {
			x.Fatal(err)
		}
		want := map[string]int64{"01A": 1, "01B": 0, "01C": 1, "01D": 1, "01E": 0}
		for _, e := range got {
			if n, ok := want[e.ID]; ok {
				if e.Count != n || e.Actor != "alice" {
					x.Fatalf("audit entry %+v: want count %d by alice", e, n)
				}
				delete(want, e.ID)
			}
		}
		if len(want) > 0 {
			x.Fatalf("audit entries missing: %v", want)
		}
	}

	with := func(id, listener string, created time.Duration) outbox.Event {
		e := ev(id, ago(time.Hour-created))
		e.Listener = listener
		return e
	}
	x.insert(with("m-1", "mail", 0), with("s-1", "search", time.Second), with("n-1", "", 2*time.Second),
		with("o-1", "other", 3*time.Second))
	now := time.Now()
	b, err := x.store().Pending(x.ctx, storage.PendingParams{Now: now, Limit: 10, Skip: storage.Skip{Listeners: []string{"mail"}}})
	if err != nil {
		x.Fatal(err)
	}
	x.wantIDs("Pending without mail", b.Events, "s-1", "n-1", "o-1")
	b, err = x.store().Pending(x.ctx, storage.PendingParams{Now: now, Limit: 10, Skip: storage.Skip{Listeners: []string{"mail", "search", "other"}}})
	if err != nil {
		x.Fatal(err)
	}
	x.wantIDs("Pending without three listeners", b.Events, "n-1")
	// A route leaves out the rows without a listener of its types alone.
	b, err = x.store().Pending(x.ctx, storage.PendingParams{Now: now, Limit: 10, Skip: storage.Skip{
		Routes: []storage.RouteKey{{AggregateType: "Other", EventType: "Created"}, {AggregateType: "Thing", EventType: "Created"}}}})
	if err != nil {
		x.Fatal(err)
	}
	x.wantIDs("Pending without the route Thing/Created", b.Events, "m-1", "s-1", "o-1")
	if cs, ok := x.h.Store.(storage.ClaimStore); ok {
		b, err := cs.Claim(x.ctx, storage.ClaimParams{Token: "node/r", TTL: time.Minute, Limit: 10, Skip: storage.Skip{
			Listeners: []string{"mail", "search", "other"}, Routes: []storage.RouteKey{{AggregateType: "Thing", EventType: "Created"}}}})
		if err != nil {
			x.Fatal(err)
		}
		x.wantIDs("Claim leaving every row out", b.Events)
	}
	if cs, ok := x.h.Store.(storage.ClaimStore); ok {
		b, err := cs.Claim(x.ctx, storage.ClaimParams{Token: "node/a", TTL: time.Minute, Limit: 10, Skip: storage.Skip{Listeners: []string{"mail", "search"}}})
		if err != nil {
			x.Fatal(err)
		}
		x.wantIDs("Claim without mail and search", b.Events, "n-1", "o-1")
		// Pin: only n-1 has no listener; a wrong token pins nothing.
		n, err := ps.Pin(x.ctx, storage.PinParams{IDs: []string{"n-1", "o-1"}, Listener: "mail", Token: "node/other"})
		x.changed("Pin with another token", n, err, 0)
		n, err = ps.Pin(x.ctx, storage.PinParams{IDs: []string{"n-1", "o-1", "m-1", "missing"}, Listener: "mail", Token: "node/a"})
		x.changed("Pin", n, err, 1)
		e := x.wantStatus("n-1", outbox.StatusNew)
		if e.Listener != "mail" || e.LockedBy != "" || !e.LockedUntil.IsZero() {
			x.Fatalf("pinned n-1: listener %q, claim %q until %v; want mail, unclaimed", e.Listener, e.LockedBy, e.LockedUntil)
		}
		if e := x.get("o-1"); e.Listener != "other" || e.LockedBy != "node/a" {
			x.Fatalf("o-1 changed by Pin: listener %q, claim %q", e.Listener, e.LockedBy)
		}
	} else {
		n, err := ps.Pin(x.ctx, storage.PinParams{IDs: []string{"n-1", "o-1"}, Listener: "mail"})
		x.changed("Pin", n, err, 1)
		if e := x.wantStatus("n-1", outbox.StatusNew); e.Listener != "mail" {
			x.Fatalf("pinned n-1: listener %q", e.Listener)
		}
	}
	b, err = x.store().Pending(x.ctx, storage.PendingParams{Now: now, Limit: 10, Skip: storage.Skip{Listeners: []string{"mail"}}})
	if err != nil {
		x.Fatal(err)
	}
	x.wantIDs("Pending without mail after the pin", b.Events, "s-1", "o-1")
	// A finished row is never pinned.
	x.insert(with("d-1", "", 4*time.Second))
	x.markDone(time.Now(), "d-1")
	n, err := ps.Pin(x.ctx, storage.PinParams{IDs: []string{"d-1"}, Listener: "mail"})
	x.changed("Pin of a DONE row", n, err, 0)

	bad := []error{
		func() error {
			_, err := ps.SetPaused(x.ctx, storage.SetPausedParams{Pause: true,
				Entry: outbox.AuditEntry{ID: "01F", At: at(0), Action: outbox.AuditPause}})
			return err
		}(),
		func() error {
			_, err := ps.SetPaused(x.ctx, storage.SetPausedParams{Listener: "x", Pause: true,
				Entry: outbox.AuditEntry{ID: "01G", At: at(0), Action: outbox.AuditResume, Target: "x"}})
			return err
		}(),
		func() error { _, err := ps.Pin(x.ctx, storage.PinParams{Listener: "mail"}); return err }(),
		func() error { _, err := ps.Pin(x.ctx, storage.PinParams{IDs: []string{"n-1"}}); return err }(),
		func() error {
			_, err := x.store().Pending(x.ctx, storage.PendingParams{Now: now, Limit: 1, Skip: storage.Skip{Listeners: []string{""}}})
			return err
		}(),
	}
	for i, err := range bad {
		if !errors.Is(err, outbox.ErrInvalidArgument) {
			x.Fatalf("bad params %d: %v, want ErrInvalidArgument", i, err)
		}
	}
	if got := list(); len(got) != 1 || got[0] != "mail" {
		x.Fatalf("Paused after bad params: %q, want mail", got)
	}
}
