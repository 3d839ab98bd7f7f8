package outboxtest

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// MemoryStore is an in-memory [storage.Store] for tests. It is safe for concurrent use and
// follows the Store contract: status updates are fenced (a DONE row never changes, and
// an update with a claim token changes only a row claimed by it), Pending returns due
// NEW and RETRY rows oldest first, Claim claims atomically, times are stored in UTC
// truncated to microseconds like the SQL stores, and last_error is truncated to
// outbox.MaxLastErrorLen bytes. Every method returns ctx.Err() when ctx is done and
// rejects invalid parameters with an error matching outbox.ErrInvalidArgument.
//
// Claims follow the store's own clock, its "database clock" (time.Now unless
// [MemoryStore.SetClock] replaced it), never a time passed in.
//
// Insert ignores its executor (which may be nil) and applies at once: there is no
// transaction to roll back. Events returned by any method are copies.
type MemoryStore struct {
	mu    sync.Mutex
	rows  map[string]*memRow
	keys  map[string]*memKey // the key table of ordered events
	clock func() time.Time   // guarded by mu
	audit []outbox.AuditEntry
	pause map[string]outbox.Pause // the paused subscriptions
}

// memKey is one key's counter, as the SQL stores' key table holds it.
type memKey struct {
	lastSeq   int64
	updatedAt time.Time
}

type memRow struct {
	ev          outbox.Event
	undecodable error
}

var (
	_ storage.Store      = (*MemoryStore)(nil)
	_ storage.OrderStore = (*MemoryStore)(nil)
)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{rows: make(map[string]*memRow), keys: make(map[string]*memKey), clock: time.Now}
}

// SetClock replaces the store's clock, which plays the database clock: Claim and a
// pre-claiming Insert judge and write claim expiry with it. nil restores time.Now.
func (s *MemoryStore) SetClock(now func() time.Time) {
	if now == nil {
		now = time.Now
	}
	s.mu.Lock()
	s.clock = now
	s.mu.Unlock()
}

// dbNow reads the store's clock. s.mu must be held.
func (s *MemoryStore) dbNow() time.Time { return canonical(s.clock()) }

// Insert adds p.Events as NEW rows with no attempts, whatever their Status and Attempts
// say, except ordered events (OrderKey set): numbered after their key's earlier events
// and WAITING, but the first of a key with nothing left that is not DONE, which is NEW
// (and the only one claimed); their OrderSeq and Status are set in p.Events. The store
// has no transactions, so there is no key lock to hold. A zero CreatedAt becomes the current time and a zero AvailableAt becomes
// the later of CreatedAt and the current time. An event with LockedBy set is stored claimed by it until the store's clock
// plus p.ClaimTTL. An event whose ID is already stored is skipped and reported in
// InsertResult.Existing. It returns an error, and inserts nothing, when the params are
// invalid, an event has no ID or an ID is used twice.
func (s *MemoryStore) Insert(ctx context.Context, _ outbox.Executor, p storage.InsertParams) (storage.InsertResult, error) {
	if err := check(ctx, p.Validate()); err != nil {
		return storage.InsertResult{}, err
	}
	rows, err := newRows(p.Events)
	if err != nil {
		return storage.InsertResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.insertLocked(p.Events, rows, p.ClaimTTL), nil
}

// newRows makes the rows of an insert of events.
func newRows(events []outbox.Event) ([]*memRow, error) {
	now := time.Now()
	rows := make([]*memRow, len(events))
	seen := make(map[string]struct{}, len(events))
	for i, e := range events {
		if e.ID == "" {
			return nil, fmt.Errorf("%w: insert: event %d has no ID", outbox.ErrInvalidArgument, i)
		}
		if _, dup := seen[e.ID]; dup {
			return nil, fmt.Errorf("insert: event ID %q is used twice", e.ID)
		}
		seen[e.ID] = struct{}{}
		e.Status, e.Attempts, e.LastError, e.DoneAt, e.FirstAttemptAt = outbox.StatusNew, 0, "", time.Time{}, time.Time{}
		if e.CreatedAt.IsZero() {
			e.CreatedAt = now
		}
		if e.AvailableAt.IsZero() { // due from the write, or from CreatedAt if later
			e.AvailableAt = later(e.CreatedAt, now)
		}
		rows[i] = &memRow{ev: normalize(e)}
	}
	return rows, nil
}

// insertLocked stores rows, made from events by newRows; the caller holds mu.
func (s *MemoryStore) insertLocked(events []outbox.Event, rows []*memRow, claimTTL time.Duration) storage.InsertResult {
	var res storage.InsertResult
	now := time.Now()
	existed := map[int]bool{}
	for i, r := range rows {
		if _, ok := s.rows[r.ev.ID]; ok {
			existed[i] = true
			res.Existing = append(res.Existing, r.ev.ID)
		}
	}
	until := s.dbNow().Add(claimTTL)
	open := map[string]bool{} // keys with an event that is not DONE
	for _, r := range s.rows {
		if r.ev.OrderKey != "" && holdsKey(r.ev.Status) {
			open[r.ev.OrderKey] = true
		}
	}
	for i, r := range rows {
		if existed[i] {
			continue
		}
		r.ev.LockedUntil = time.Time{}
		if r.ev.LockedBy != "" {
			r.ev.LockedUntil = until
		}
		r.ev.OrderSeq = 0
		if k := r.ev.OrderKey; k != "" {
			// Ordered: WAITING, numbered after the key's earlier events. The store
			// has no transactions, so the insert is its own commit.
			key := s.keys[k]
			if key == nil {
				key = &memKey{}
				s.keys[k] = key
			}
			key.lastSeq++
			key.updatedAt = now
			r.ev.Status, r.ev.OrderSeq = outbox.StatusWaiting, key.lastSeq
			if !open[k] { // nothing before it: NEW at once, claimed if asked
				open[k] = true
				r.ev.Status = outbox.StatusNew
			} else {
				r.ev.LockedBy, r.ev.LockedUntil = "", time.Time{}
			}
			events[i].OrderSeq, events[i].Status = key.lastSeq, r.ev.Status
		}
		s.rows[r.ev.ID] = r
	}
	return res
}

// FanOut implements [storage.FanOutStore.FanOut]: under the store's lock, each event is
// marked DONE (or deleted) as MarkDone would, and the deliveries of those that changed
// are inserted as Insert would.
func (s *MemoryStore) FanOut(ctx context.Context, p storage.FanOutParams) (storage.FanOutResult, error) {
	if err := check(ctx, p.Validate()); err != nil {
		return storage.FanOutResult{}, err
	}
	rows := make([][]*memRow, len(p.Events))
	for i, e := range p.Events {
		var err error
		if rows[i], err = newRows(e.Deliveries); err != nil {
			return storage.FanOutResult{}, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var res storage.FanOutResult
	for i, e := range p.Events {
		r, ok := s.rows[e.ID]
		if !ok || fenced(r, e.Token) {
			continue
		}
		s.markDone(r, canonical(p.DoneAt), p.Delete)
		res.Split = append(res.Split, e.ID)
		res.Existing = append(res.Existing, s.insertLocked(e.Deliveries, rows[i], p.ClaimTTL).Existing...)
	}
	return res, nil
}

// Promote implements [storage.OrderStore.Promote].
func (s *MemoryStore) Promote(ctx context.Context, p storage.PromoteParams) (storage.PromoteResult, error) {
	var res storage.PromoteResult
	if err := check(ctx, p.Validate()); err != nil {
		return res, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	want := map[string]bool{}
	for _, k := range p.Keys {
		want[k] = true
	}
	only := map[string]bool{} // p.IDs
	for _, id := range p.IDs {
		only[id] = true
		if r, ok := s.rows[id]; ok && r.ev.OrderKey != "" {
			want[r.ev.OrderKey] = true
		}
	}
	if len(p.IDs) > 0 && len(want) == 0 {
		return res, nil
	}
	// Per key: its lowest WAITING row, and whether anything holds it.
	heads := map[string]*memRow{}
	held := map[string]bool{}
	for _, r := range s.rows {
		e := &r.ev
		if e.OrderKey == "" || len(want) > 0 && !want[e.OrderKey] {
			continue
		}
		switch e.Status {
		case outbox.StatusNew, outbox.StatusRetry:
			held[e.OrderKey] = true
		case outbox.StatusDead:
			held[e.OrderKey] = held[e.OrderKey] || p.DeadBlocks
		case outbox.StatusWaiting:
			if h := heads[e.OrderKey]; h == nil || e.OrderSeq < h.ev.OrderSeq {
				heads[e.OrderKey] = r
			}
		}
	}
	keys := slices.Sorted(maps.Keys(heads))
	for _, k := range keys {
		if held[k] {
			continue
		}
		if len(want) == 0 && res.Promoted == int64(p.Limit) {
			break
		}
		h := heads[k]
		if len(only) > 0 && !only[h.ev.ID] {
			continue
		}
		h.ev.Status = outbox.StatusNew
		if now := s.dbNow(); h.ev.AvailableAt.Before(now) { // due from the promote, as the SQL store
			h.ev.AvailableAt = now
		}
		if p.Token != "" {
			h.ev.LockedBy, h.ev.LockedUntil = p.Token, s.dbNow().Add(p.TTL)
		}
		res.Promoted++
		if p.Read {
			if h.undecodable != nil {
				res.Undecodable = append(res.Undecodable, outbox.RowError{EventID: h.ev.ID, Err: h.undecodable})
				continue
			}
			res.Events = append(res.Events, clone(h.ev))
		}
	}
	return res, nil
}

// Claim implements [storage.ClaimStore.Claim] with the store's clock as the database clock.
// Rows marked with [MemoryStore.Corrupt] are claimed and come back in Undecodable.
func (s *MemoryStore) Claim(ctx context.Context, p storage.ClaimParams) (storage.PendingBatch, error) {
	if err := check(ctx, p.Validate()); err != nil {
		return storage.PendingBatch{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.dbNow()
	createdBefore := now.Add(-p.SkipRecent)
	var rows []*memRow
	for _, r := range s.rows {
		e := &r.ev
		if (e.Status == outbox.StatusNew || e.Status == outbox.StatusRetry) &&
			!e.AvailableAt.After(now) && !e.AvailableAt.Before(p.DueFrom) && !e.CreatedAt.After(createdBefore) &&
			(e.LockedUntil.IsZero() || e.LockedUntil.Before(now)) && !skipped(e, p.Skip) {
			rows = append(rows, r)
		}
	}
	slices.SortFunc(rows, func(a, b *memRow) int {
		return cmp.Or(a.ev.AvailableAt.Compare(b.ev.AvailableAt), a.ev.CreatedAt.Compare(b.ev.CreatedAt),
			strings.Compare(a.ev.ID, b.ev.ID))
	})
	until := now.Add(p.TTL)
	var b storage.PendingBatch
	for _, r := range rows[:min(len(rows), p.Limit)] {
		if r.ev.LockedBy != "" && r.ev.LockedBy != p.Token {
			b.TakenOver++ // an expired claim of another token
		}
		r.ev.LockedBy, r.ev.LockedUntil = p.Token, until
		if r.undecodable != nil {
			b.Undecodable = append(b.Undecodable, outbox.RowError{EventID: r.ev.ID, Err: r.undecodable})
			continue
		}
		b.Events = append(b.Events, clone(r.ev))
	}
	return b, nil
}

// RenewClaim implements [storage.ClaimStore.RenewClaim] with the store's clock as the
// database clock.
func (s *MemoryStore) RenewClaim(ctx context.Context, p storage.RenewClaimParams) (int64, error) {
	if err := check(ctx, p.Validate()); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[p.ID]
	if !ok || r.ev.LockedBy != p.Token || (r.ev.Status != outbox.StatusNew && r.ev.Status != outbox.StatusRetry) {
		return 0, nil
	}
	r.ev.LockedUntil = s.dbNow().Add(p.TTL)
	return 1, nil
}

// fenced reports whether an outcome update with token must leave the row alone: it is
// DONE, WAITING or FALLBACK, or token is set and the row is not claimed by it.
func fenced(r *memRow, token string) bool {
	return r.ev.Status == outbox.StatusDone || r.ev.Status == outbox.StatusWaiting || r.ev.Status >= outbox.StatusFallback ||
		(token != "" && r.ev.LockedBy != token)
}

// holdsKey reports whether a row of status holds its order key: it is not DONE nor
// another handled outcome (FALLBACK and above).
func holdsKey(st outbox.Status) bool { return st != outbox.StatusDone && st < outbox.StatusFallback }

// countAttempt records a failed attempt: attempts, and the first one's time.
func (s *MemoryStore) countAttempt(e *outbox.Event) {
	e.Attempts++
	if e.FirstAttemptAt.IsZero() {
		e.FirstAttemptAt = s.dbNow()
	}
}

// clearClaim ends the row's claim, as every outcome does.
func clearClaim(e *outbox.Event) { e.LockedBy, e.LockedUntil = "", time.Time{} }

// MarkDone implements [storage.Store.MarkDone].
func (s *MemoryStore) MarkDone(ctx context.Context, p storage.MarkDoneParams) (int64, error) {
	if err := check(ctx, p.Validate()); err != nil {
		return 0, err
	}
	doneAt := canonical(p.DoneAt)
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	if p.Tokens != nil {
		// Each row fenced by its own token; a row listed twice changes once.
		for i, id := range p.IDs {
			r, ok := s.rows[id]
			if !ok || fenced(r, p.Tokens[i]) {
				continue
			}
			s.markDone(r, doneAt, p.Delete)
			n++
		}
		return n, nil
	}
	for _, id := range uniq(p.IDs) {
		r, ok := s.rows[id]
		if !ok || fenced(r, p.Token) {
			continue
		}
		s.markDone(r, doneAt, p.Delete)
		n++
	}
	return n, nil
}

// markDone marks r DONE, or deletes it.
func (s *MemoryStore) markDone(r *memRow, doneAt time.Time, del bool) {
	if del {
		delete(s.rows, r.ev.ID)
		return
	}
	r.ev.Status, r.ev.DoneAt = outbox.StatusDone, doneAt
	clearClaim(&r.ev)
}

// Reschedule implements [storage.Store.Reschedule].
func (s *MemoryStore) Reschedule(ctx context.Context, p storage.RescheduleParams) (int64, error) {
	if err := check(ctx, p.Validate()); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[p.ID]
	if !ok || fenced(r, p.Token) {
		return 0, nil
	}
	r.ev.Status, r.ev.AvailableAt = p.Status, canonical(p.AvailableAt)
	clearClaim(&r.ev)
	if p.CountAttempt {
		s.countAttempt(&r.ev)
	}
	if p.LastError != "" {
		r.ev.LastError = truncateLastError(p.LastError)
	}
	return 1, nil
}

// MarkDead implements [storage.Store.MarkDead].
func (s *MemoryStore) MarkDead(ctx context.Context, p storage.MarkDeadParams) (int64, error) {
	if err := check(ctx, p.Validate()); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[p.ID]
	if !ok || fenced(r, p.Token) {
		return 0, nil
	}
	r.ev.Status, r.ev.LastError, r.ev.DoneAt = outbox.StatusDead, truncateLastError(p.Reason), canonical(p.DeadAt)
	if p.Listener != "" {
		r.ev.Listener = p.Listener
	}
	if p.Fallback {
		r.ev.Status = outbox.StatusFallback
	}
	clearClaim(&r.ev)
	if p.CountAttempt {
		s.countAttempt(&r.ev)
	}
	return 1, nil
}

// Pending implements [storage.Store.Pending]. Rows marked with [MemoryStore.Corrupt] come
// back in Undecodable.
func (s *MemoryStore) Pending(ctx context.Context, p storage.PendingParams) (storage.PendingBatch, error) {
	if err := check(ctx, p.Validate()); err != nil {
		return storage.PendingBatch{}, err
	}
	now := canonical(p.Now)
	createdBefore := canonical(p.Now.Add(-p.SkipRecent))
	s.mu.Lock()
	defer s.mu.Unlock()
	after := outbox.Cursor{AvailableAt: canonical(p.After.AvailableAt), CreatedAt: canonical(p.After.CreatedAt), ID: p.After.ID}
	rows := s.sorted(func(e *outbox.Event) bool {
		return (e.Status == outbox.StatusNew || e.Status == outbox.StatusRetry) &&
			!e.AvailableAt.After(now) && !e.CreatedAt.After(createdBefore) &&
			(p.After.IsZero() || dueAfter(e, after)) && !skipped(e, p.Skip)
	})
	slices.SortStableFunc(rows, func(a, b *memRow) int { return a.ev.AvailableAt.Compare(b.ev.AvailableAt) })
	var b storage.PendingBatch
	for _, r := range rows[:min(len(rows), p.Limit)] {
		if r.undecodable != nil {
			b.Undecodable = append(b.Undecodable, outbox.RowError{EventID: r.ev.ID, Err: r.undecodable})
			continue
		}
		b.Events = append(b.Events, clone(r.ev))
	}
	return b, nil
}

// Get implements [storage.Store.Get]. It returns an error matching outbox.ErrNotFound when
// no row has the ID.
func (s *MemoryStore) Get(ctx context.Context, id string) (outbox.Event, error) {
	if err := ctx.Err(); err != nil {
		return outbox.Event{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[id]
	if !ok {
		return outbox.Event{}, fmt.Errorf("get event %q: %w", id, outbox.ErrNotFound)
	}
	if r.undecodable != nil {
		return outbox.Event{}, outbox.RowError{EventID: id, Err: r.undecodable}
	}
	return clone(r.ev), nil
}

// Purge implements [storage.Store.Purge]: a row's finish time is its DoneAt, or its
// CreatedAt when DoneAt is zero (DEAD rows); undelivered rows go by their CreatedAt.
func (s *MemoryStore) Purge(ctx context.Context, p storage.PurgeParams) (int64, error) {
	if err := check(ctx, p.Validate()); err != nil {
		return 0, err
	}
	before, deadBefore, undelivered := canonical(p.Before), canonical(p.Before), canonical(p.UndeliveredBefore)
	if !p.DeadBefore.IsZero() {
		deadBefore = canonical(p.DeadBefore)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// The batch: finished rows, then NEW and RETRY rows, then WAITING rows, each
	// oldest first, as long as it has room.
	n := 0
	take := func(at func(e *outbox.Event) time.Time, match func(e *outbox.Event) bool) {
		var rows []*memRow
		for _, r := range s.rows {
			if match(&r.ev) {
				rows = append(rows, r)
			}
		}
		slices.SortFunc(rows, func(a, b *memRow) int {
			return cmp.Or(at(&a.ev).Compare(at(&b.ev)), strings.Compare(a.ev.ID, b.ev.ID))
		})
		for _, r := range rows[:min(len(rows), p.Limit-n)] {
			delete(s.rows, r.ev.ID)
			n++
		}
	}
	take(finishedAt, func(e *outbox.Event) bool {
		st := e.Status
		return st == outbox.StatusDone && finishedAt(e).Before(before) ||
			(st == outbox.StatusDead || st >= outbox.StatusFallback) && finishedAt(e).Before(deadBefore)
	})
	created := func(e *outbox.Event) time.Time { return e.CreatedAt }
	for _, statuses := range [][]outbox.Status{{outbox.StatusNew, outbox.StatusRetry}, {outbox.StatusWaiting}} {
		if undelivered.IsZero() || n >= p.Limit {
			break
		}
		take(created, func(e *outbox.Event) bool {
			return slices.Contains(statuses, e.Status) && e.CreatedAt.Before(undelivered)
		})
	}
	if n < p.Limit {
		// Keys not written since the cutoff, with nothing left that is not DONE.
		open := map[string]bool{}
		for _, r := range s.rows {
			if r.ev.OrderKey != "" && holdsKey(r.ev.Status) {
				open[r.ev.OrderKey] = true
			}
		}
		for k, key := range s.keys {
			if !open[k] && key.updatedAt.Before(before) {
				delete(s.keys, k)
			}
		}
	}
	return int64(n), nil
}

// Stats implements [storage.StatsStore.Stats].
func (s *MemoryStore) Stats(ctx context.Context) (outbox.Stats, error) {
	if err := ctx.Err(); err != nil {
		return outbox.Stats{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := outbox.Stats{Counts: make(map[outbox.Status]int64)}
	type keyState struct {
		waiting, new bool
		holder       time.Time // the oldest RETRY or DEAD event
	}
	keys := map[string]*keyState{}
	for _, r := range s.rows {
		st.Counts[r.ev.Status]++
		if r.ev.Status == outbox.StatusNew || r.ev.Status == outbox.StatusRetry {
			if st.OldestPending.IsZero() || r.ev.CreatedAt.Before(st.OldestPending) {
				st.OldestPending = r.ev.CreatedAt
			}
		}
		if r.ev.OrderKey == "" {
			continue
		}
		k := keys[r.ev.OrderKey]
		if k == nil {
			k = &keyState{}
			keys[r.ev.OrderKey] = k
		}
		switch r.ev.Status {
		case outbox.StatusWaiting:
			k.waiting = true
		case outbox.StatusNew:
			k.new = true
		case outbox.StatusRetry, outbox.StatusDead:
			if k.holder.IsZero() || r.ev.CreatedAt.Before(k.holder) {
				k.holder = r.ev.CreatedAt
			}
		}
	}
	for _, k := range keys {
		if k.waiting && !k.new && !k.holder.IsZero() {
			st.BlockedKeys++
			if st.OldestBlocked.IsZero() || k.holder.Before(st.OldestBlocked) {
				st.OldestBlocked = k.holder
			}
		}
	}
	return st, nil
}

// Events returns a copy of every stored row, oldest first (CreatedAt, then ID).
func (s *MemoryStore) Events() []outbox.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	rows := s.sorted(func(*outbox.Event) bool { return true })
	out := make([]outbox.Event, len(rows))
	for i, r := range rows {
		out[i] = clone(r.ev)
	}
	return out
}

// Event returns a copy of the row with the given ID, and whether it exists.
func (s *MemoryStore) Event(id string) (outbox.Event, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[id]
	if !ok {
		return outbox.Event{}, false
	}
	return clone(r.ev), true
}

// Put stores events exactly as given (status, attempts, last error and times
// included), replacing rows with the same ID. Use it to set up a table state that
// Insert cannot produce, such as a RETRY row with attempts. Times are normalised as the
// store always does.
func (s *MemoryStore) Put(events ...outbox.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range events {
		s.rows[e.ID] = &memRow{ev: normalize(e)}
	}
}

// Corrupt makes the row with the given ID undecodable: Pending reports it in
// Undecodable with err, and Get returns an [outbox.RowError]. It reports whether the
// row exists.
func (s *MemoryStore) Corrupt(id string, err error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[id]
	if ok {
		r.undecodable = err
	}
	return ok
}

// sorted returns the rows matching keep in (CreatedAt, ID) order. s.mu must be held.
func (s *MemoryStore) sorted(keep func(*outbox.Event) bool) []*memRow {
	var rows []*memRow
	for _, r := range s.rows {
		if keep(&r.ev) {
			rows = append(rows, r)
		}
	}
	slices.SortFunc(rows, func(a, b *memRow) int {
		return cmp.Or(a.ev.CreatedAt.Compare(b.ev.CreatedAt), strings.Compare(a.ev.ID, b.ev.ID))
	})
	return rows
}

func check(ctx context.Context, err error) error {
	if err != nil {
		return err
	}
	return ctx.Err()
}

func matchDead(e *outbox.Event, f outbox.DeadFilter) bool {
	return e.Status == outbox.StatusDead &&
		(f.EventType == "" || e.Type == f.EventType) &&
		(f.AggregateType == "" || e.AggregateType == f.AggregateType) &&
		(f.Listener == "" || e.Listener == f.Listener)
}

func keyAfter(e *outbox.Event, c outbox.Cursor) bool {
	if d := e.CreatedAt.Compare(c.CreatedAt); d != 0 {
		return d > 0
	}
	return e.ID > c.ID
}

// dueAfter reports whether e comes after c in the poller's order (available_at,
// created_at, event_id); a c without CreatedAt and ID is the start of its AvailableAt.
func dueAfter(e *outbox.Event, c outbox.Cursor) bool {
	if d := e.AvailableAt.Compare(c.AvailableAt); d != 0 || c.CreatedAt.IsZero() && c.ID == "" {
		return d >= 0
	}
	return keyAfter(e, c)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func finishedAt(e *outbox.Event) time.Time {
	if e.DoneAt.IsZero() {
		return e.CreatedAt
	}
	return e.DoneAt
}

func uniq(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}

func canonical(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}

func normalize(e outbox.Event) outbox.Event {
	e.CreatedAt, e.AvailableAt, e.DoneAt = canonical(e.CreatedAt), canonical(e.AvailableAt), canonical(e.DoneAt)
	e.LockedUntil = canonical(e.LockedUntil)
	e.LastError = truncateLastError(e.LastError)
	return clone(e)
}

func clone(e outbox.Event) outbox.Event {
	e.Payload = bytes.Clone(e.Payload)
	if len(e.Headers) == 0 {
		e.Headers = nil
	} else {
		e.Headers = maps.Clone(e.Headers)
	}
	return e
}

// truncateLastError keeps last_error storable like the SQL stores do: valid UTF-8
// without NUL bytes, at most outbox.MaxLastErrorLen bytes, cut on a character boundary.
func truncateLastError(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	if len(s) <= outbox.MaxLastErrorLen {
		return s
	}
	cut := outbox.MaxLastErrorLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
