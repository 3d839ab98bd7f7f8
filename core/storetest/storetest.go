// Package storetest is the conformance suite every [storage.Store] must pass: the SQL
// store on each database, the in-memory store, and stores written by users.
//
// Import path: github.com/outboxkit/outbox/core/storetest (package storetest). It
// imports only the standard library and the packages outbox, storage and outboxtype.
//
// # Usage
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, storetest.Features{}, func(t *testing.T) storetest.Harness {
//			db := openEmptyDatabase(t) // isolated per test, closed in t.Cleanup
//			store, err := outbox.NewSQLStore(db, outbox.SQLite, outbox.SQLStoreConfig{})
//			if err != nil {
//				t.Fatal(err)
//			}
//			if err := outbox.Migrate(t.Context(), db, outbox.SQLite); err != nil {
//				t.Fatal(err)
//			}
//			return storetest.Harness{Store: store, DB: db}
//		})
//	}
//
// Every subtest runs in parallel with its own harness. The suite uses only Store
// methods, so a store without SQL passes it too; tests that need a real transaction
// (rollback atomicity) run only when the harness has a DB. Bad parameters must be
// rejected with an error matching [outbox.ErrInvalidArgument]; the params' Validate
// methods implement the checks.
//
// # Claims
//
// The Claim tests (claim order and limit, disjoint concurrent claims, expiry, token
// fencing of every outcome update, pre-claimed inserts, renewal) follow the store's database
// clock, so they place rows relative to the real time and wait for short claims to
// expire (a few hundred milliseconds each): the database clock must be within a few
// seconds of the test process's.
package storetest

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// DefaultLargeBatch is the batch size of the large-batch tests: more events than one
// PostgreSQL statement can bind (65535 parameters).
const DefaultLargeBatch = 8000

// Features describes the store under test where stores may legitimately differ.
type Features struct {
	// LargeBatch is the number of events inserted, marked and counted at once by the
	// large-batch test; it should exceed what one statement of the store can carry.
	// -1 skips the test. Defaults to DefaultLargeBatch.
	LargeBatch int
	// NoTakeOverCount: the store's Claim cannot tell a take-over (PendingBatch.TakenOver
	// stays 0), as on SQLite.
	NoTakeOverCount bool
	// HeadsWait: the store inserts the first event of a key with nothing before it
	// WAITING, for a Promote after commit to make NEW, instead of NEW.
	HeadsWait bool
}

// Harness is one store under test, backed by empty storage of its own.
type Harness struct {
	// Store is the store under test.
	Store storage.Store
	// DB is the database behind Store, or nil for a store without one. When set, Insert
	// gets DB (or a transaction begun on it) as its executor and the transaction tests
	// run; when nil, Insert gets a nil executor.
	DB *sql.DB
}

// Run runs the conformance suite. newHarness is called once per subtest and must return
// a store over empty storage that no other subtest sees, registering its own cleanup
// with t.Cleanup.
func Run(t *testing.T, f Features, newHarness func(t *testing.T) Harness) {
	t.Helper()
	f.LargeBatch = cmp.Or(f.LargeBatch, DefaultLargeBatch)
	tests := []struct {
		name string
		fn   func(*fixture)
		tx   bool // needs Harness.DB
	}{
		{name: "InsertGetRoundTrip", fn: testInsertGetRoundTrip},
		{name: "InsertHeadersNilOrEmpty", fn: testInsertHeadersNilOrEmpty},
		{name: "InsertBatch", fn: testInsertBatch},
		{name: "InsertLargeBatch", fn: func(x *fixture) { testInsertLargeBatch(x, f.LargeBatch) }},
		{name: "InsertExistingID", fn: testInsertExistingID},
		{name: "InsertExistingIDInTx", fn: testInsertExistingIDInTx, tx: true},
		{name: "InsertNewIDs", fn: testInsertNewIDs, tx: true},
		{name: "InsertRollback", fn: testInsertRollback, tx: true},
		{name: "InsertCommit", fn: testInsertCommit, tx: true},
		{name: "GetNotFound", fn: testGetNotFound},
		{name: "MarkDone", fn: testMarkDone},
		{name: "DoneIsFenced", fn: testDoneIsFenced},
		{name: "MarkDoneDelete", fn: testMarkDoneDelete},
		{name: "Reschedule", fn: testReschedule},
		{name: "MarkDead", fn: testMarkDead},
		{name: "Fallback", fn: testFallback},
		{name: "Discard", fn: testDiscard},
		{name: "FanOut", fn: testFanOut},
		{name: "FanOutOrdered", fn: testFanOutOrdered},
		{name: "LastErrorTruncated", fn: testLastErrorTruncated},
		{name: "PendingDueAndOrder", fn: testPendingDueAndOrder},
		{name: "PendingLimit", fn: testPendingLimit},
		{name: "PendingAfter", fn: testPendingAfter},
		{name: "ListDeadFilters", fn: testListDeadFilters},
		{name: "ListDeadPagination", fn: testListDeadPagination},
		{name: "CountDead", fn: testCountDead},
		{name: "ReplayByID", fn: testReplayByID},
		{name: "ReplayByFilter", fn: testReplayByFilter},
		{name: "DeleteDead", fn: testDeleteDead},
		{name: "ListEvents", fn: testListEvents},
		{name: "ListEventsScanLimit", fn: testListEventsScanLimit},
		{name: "ListEventsByOrderKey", fn: testListEventsByOrderKey},
		{name: "ListEventsBlocking", fn: testListEventsBlocking},
		{name: "ListEventsErrorFolding", fn: testListEventsErrorFolding},
		{name: "CountByType", fn: testCountByType},
		{name: "CountEvents", fn: testCountEvents},
		{name: "CountBlockedKeys", fn: testCountBlockedKeys},
		{name: "Audit", fn: testAudit},
		{name: "AuditedChange", fn: testAuditedChange},
		{name: "Pause", fn: testPause},
		{name: "Purge", fn: testPurge},
		{name: "PurgeByOutcome", fn: testPurgeByOutcome},
		{name: "PurgeUndelivered", fn: testPurgeUndelivered},
		{name: "Stats", fn: testStats},
		{name: "BadParams", fn: testBadParams},
		{name: "CanceledContext", fn: testCanceledContext},
		{name: "OddIDs", fn: testOddIDs},
		{name: "ClaimDueAndOrder", fn: testClaimDueAndOrder},
		{name: "ClaimDueFrom", fn: testClaimDueFrom},
		{name: "ClaimLimitDisjoint", fn: testClaimLimitDisjoint},
		{name: "ClaimExpiry", fn: func(x *fixture) { testClaimExpiry(x, !f.NoTakeOverCount) }},
		{name: "ClaimFencing", fn: testClaimFencing},
		{name: "MarkDoneTokens", fn: testMarkDoneTokens},
		{name: "InsertClaimed", fn: testInsertClaimed},
		{name: "RenewClaim", fn: testRenewClaim},
		{name: "ClaimConcurrent", fn: testClaimConcurrent},
		{name: "ClaimBadParams", fn: testClaimBadParams},
		{name: "OrderedInsert", fn: func(x *fixture) { testOrderedInsert(x, f.HeadsWait) }},
		{name: "OrderedInsertExistingID", fn: testOrderedInsertExistingID},
		{name: "OrderedInsertClaimed", fn: testOrderedInsertClaimed},
		{name: "PromoteMovesTheHeadOnly", fn: testPromoteMovesTheHeadOnly},
		{name: "PromoteDueFromThePromote", fn: testPromoteDueFromThePromote},
		{name: "PromoteDeadPolicy", fn: testPromoteDeadPolicy},
		{name: "FallbackReleasesKey", fn: testFallbackReleasesKey},
		{name: "PurgeForgetsIdleKeys", fn: testPurgeForgetsIdleKeys},
		{name: "PurgeUndeliveredKeys", fn: testPurgeUndeliveredKeys},
		{name: "OrderedKeyLock", fn: testOrderedKeyLock, tx: true},
		{name: "StatsBlockedKeys", fn: testStatsBlockedKeys},
		{name: "PromoteIDs", fn: testPromoteIDs},
		{name: "PromoteRead", fn: testPromoteRead},
		{name: "OrderedLargeBatch", fn: testOrderedLargeBatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.name == "InsertLargeBatch" && f.LargeBatch < 0 {
				t.Skip("Features.LargeBatch is -1")
			}
			h := newHarness(t)
			if h.Store == nil {
				t.Fatal("newHarness returned no Store")
			}
			if tc.tx && h.DB == nil {
				t.Skip("needs a transaction: Harness.DB is nil")
			}
			tc.fn(&fixture{T: t, h: h, ctx: t.Context()})
		})
	}
}

// fixture is what each test works with.
type fixture struct {
	*testing.T
	h   Harness
	ctx context.Context
}

func (x *fixture) store() storage.Store { return x.h.Store }

// claims returns the store as an storage.ClaimStore, or skips the test.
func (x *fixture) claims() storage.ClaimStore {
	cs, ok := x.h.Store.(storage.ClaimStore)
	if !ok {
		x.Skipf("%T does not implement storage.ClaimStore", x.h.Store)
	}
	return cs
}

// dead returns the store as an storage.DeadStore, or skips the test.
func (x *fixture) dead() storage.DeadStore {
	ds, ok := x.h.Store.(storage.DeadStore)
	if !ok {
		x.Skipf("%T does not implement storage.DeadStore", x.h.Store)
	}
	return ds
}

// stats returns the store as an storage.StatsStore, or skips the test.
func (x *fixture) stats() storage.StatsStore {
	ss, ok := x.h.Store.(storage.StatsStore)
	if !ok {
		x.Skipf("%T does not implement storage.StatsStore", x.h.Store)
	}
	return ss
}

// exec returns the executor for Insert outside a transaction.
func (x *fixture) exec() outbox.Executor {
	if x.h.DB == nil {
		return nil
	}
	return x.h.DB
}

// base is the reference time of every test. Times are far from the real clock so that a
// store that used it instead of the given times would fail.
var base = time.Date(2031, 3, 1, 12, 0, 0, 0, time.UTC)

// at returns base plus d.
func at(d time.Duration) time.Time { return base.Add(d) }

// ev returns a valid event created at created and due then.
func ev(id string, created time.Time) outbox.Event {
	payload, _ := json.Marshal(map[string]string{"id": id})
	return outbox.Event{
		ID: id, Type: "Created", AggregateType: "Thing", AggregateID: "agg-" + id,
		Payload: payload, CreatedAt: created, AvailableAt: created,
	}
}

func (x *fixture) insert(events ...outbox.Event) {
	x.Helper()
	if _, err := x.store().Insert(x.ctx, x.exec(), storage.InsertParams{Events: events}); err != nil {
		x.Fatalf("Insert: %v", err)
	}
}

func (x *fixture) get(id string) outbox.Event {
	x.Helper()
	e, err := x.store().Get(x.ctx, id)
	if err != nil {
		x.Fatalf("Get(%q): %v", id, err)
	}
	return e
}

func (x *fixture) notFound(id string) {
	x.Helper()
	if e, err := x.store().Get(x.ctx, id); !errors.Is(err, outbox.ErrNotFound) {
		x.Fatalf("Get(%q) = %+v, %v; want ErrNotFound", id, e, err)
	}
}

func (x *fixture) wantStatus(id string, want outbox.Status) outbox.Event {
	x.Helper()
	e := x.get(id)
	if e.Status != want {
		x.Fatalf("%s: status %s, want %s", id, e.Status, want)
	}
	return e
}

// changed asserts a method's row count.
func (x *fixture) changed(what string, n int64, err error, want int64) {
	x.Helper()
	if err != nil {
		x.Fatalf("%s: %v", what, err)
	}
	if n != want {
		x.Fatalf("%s changed %d rows, want %d", what, n, want)
	}
}

func (x *fixture) markDone(doneAt time.Time, ids ...string) int64 {
	x.Helper()
	n, err := x.store().MarkDone(x.ctx, storage.MarkDoneParams{IDs: ids, DoneAt: doneAt})
	if err != nil {
		x.Fatalf("MarkDone: %v", err)
	}
	return n
}

func (x *fixture) markDead(id, reason string) { x.Helper(); x.markDeadAt(id, reason, base) }

func (x *fixture) markDeadAt(id, reason string, deadAt time.Time) {
	x.Helper()
	n, err := x.store().MarkDead(x.ctx, storage.MarkDeadParams{DeadAt: deadAt, ID: id, Reason: reason, CountAttempt: true})
	x.changed("MarkDead "+id, n, err, 1)
}

func (x *fixture) retry(id string, availableAt time.Time) {
	x.Helper()
	n, err := x.store().Reschedule(x.ctx, storage.RescheduleParams{
		ID: id, Status: outbox.StatusRetry, AvailableAt: availableAt, CountAttempt: true, LastError: "retry " + id,
	})
	x.changed("Reschedule "+id, n, err, 1)
}

func (x *fixture) pending(now time.Time, skip time.Duration, limit int) storage.PendingBatch {
	x.Helper()
	b, err := x.store().Pending(x.ctx, storage.PendingParams{Now: now, SkipRecent: skip, Limit: limit})
	if err != nil {
		x.Fatalf("Pending: %v", err)
	}
	if len(b.Undecodable) > 0 {
		x.Fatalf("Pending: undecodable rows %v", b.Undecodable)
	}
	return b
}

func ids(events []outbox.Event) []string {
	out := make([]string, 0, len(events))
	for _, e := range events {
		out = append(out, e.ID)
	}
	return out
}

func (x *fixture) wantIDs(what string, got []outbox.Event, want ...string) {
	x.Helper()
	if g := ids(got); !reflect.DeepEqual(g, want) && (len(g) > 0 || len(want) > 0) {
		x.Fatalf("%s: got %q, want %q", what, g, want)
	}
}

func (x *fixture) wantTime(what string, got, want time.Time) {
	x.Helper()
	want = want.UTC().Truncate(time.Microsecond)
	if !got.Equal(want) || (!got.IsZero() && got.Location() != time.UTC) {
		x.Fatalf("%s = %v, want %v (UTC)", what, got, want)
	}
}

// jsonEqual compares JSON documents by value: PostgreSQL's jsonb does not keep the text.
func jsonEqual(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

func seq(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%05d", prefix, i)
	}
	return out
}
