package outbox_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
	"github.com/outboxkit/outbox/internal/testdb"
)

// pgStatements records the statements pgx sends, with their arguments.
type pgStatements struct {
	mu  sync.Mutex
	got []pgStatement
}

type pgStatement struct {
	sql  string
	args []any
}

func (r *pgStatements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.mu.Lock()
	r.got = append(r.got, pgStatement{sql: d.SQL, args: d.Args})
	r.mu.Unlock()
	return ctx
}

func (r *pgStatements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// take returns the statements recorded since the last call that start with prefix.
func (r *pgStatements) take(prefix string) []pgStatement {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []pgStatement
	for _, s := range r.got {
		if strings.HasPrefix(s.sql, prefix) {
			out = append(out, s)
		}
	}
	r.got = nil
	return out
}

// tracedPostgresStore returns a store on b's table whose pool records the statements
// it sends.
func tracedPostgresStore(t *testing.T, b sqlBundle) (storage.Store, *pgStatements) {
	t.Helper()
	cfg, err := pgx.ParseConfig(testdb.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	rec := &pgStatements{}
	cfg.Tracer = rec
	db := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { _ = db.Close() })
	store, err := outbox.NewSQLStore(db, outbox.Postgres, outbox.SQLStoreConfig{Table: b.table})
	if err != nil {
		t.Fatal(err)
	}
	return store, rec
}

// TestPostgresTokenFencesDriveFromTheIDs checks the plans of the statements that fence
// each row by its own claim token (MultiNode mode's batched DONE updates and deletes,
// and the fan-out's marks) on a table whose statistics say that every row is DONE
// while thousands are pending: an outbox table in its steady state, analyzed before a
// backlog built up. Such a statement must find its rows from its list of IDs by primary
// key. Written as a semi-join of the table with the pairs, it let the planner scan the
// pending rows and compare each with every pair (seconds a statement under load in the
// W1m benchmark, found with auto_explain).
func TestPostgresTokenFencesDriveFromTheIDs(t *testing.T) {
	t.Parallel()
	b := setupPostgres(t)
	ctx := t.Context()
	base := time.Date(2031, 6, 1, 0, 0, 0, 0, time.UTC)

	store, rec := tracedPostgresStore(t, b)

	// 20,000 DONE rows, analyzed, and statistics that stay as they are.
	for chunk := range 20 {
		events := make([]outbox.Event, 1000)
		ids := make([]string, len(events))
		for i := range events {
			ids[i] = fmt.Sprintf("done-%02d-%04d", chunk, i)
			events[i] = testEvent(ids[i], base)
		}
		if _, err := b.store.Insert(ctx, b.db, storage.InsertParams{Events: events}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.store.MarkDone(ctx, storage.MarkDoneParams{IDs: ids, DoneAt: base}); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{"ALTER TABLE " + b.quoted() + " SET (autovacuum_enabled = false)", "ANALYZE " + b.quoted()} {
		if _, err := b.db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	// Then 3,000 pending rows, each claimed by a token of its own (pre-claimed writes).
	pending := make([]outbox.Event, 3000)
	for i := range pending {
		pending[i] = testEvent(fmt.Sprintf("p-%04d", i), base)
		pending[i].LockedBy = fmt.Sprintf("n1/%04d", i)
	}
	if _, err := b.store.Insert(ctx, b.db, storage.InsertParams{Events: pending, ClaimTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}

	// The plan of a recorded statement must find its rows by primary key from its IDs.
	pkey := b.table[strings.LastIndex(b.table, ".")+1:] + "_pkey"
	checkPlan := func(t *testing.T, name string, st pgStatement) {
		t.Helper()
		plan := explain(t, b, st.sql, st.args)
		if strings.Contains(plan, "Seq Scan") || strings.Contains(plan, "Semi Join") || !strings.Contains(plan, pkey) {
			t.Errorf("%s: %s\ndoes not find its rows by primary key from its IDs (%s):\n%s", name, st.sql, pkey, plan)
		}
	}
	check := func(t *testing.T, name string, from int, del bool) {
		t.Helper()
		// 500 pairs in reverse ID order, and one whose token is not the row's.
		var ids, tokens []string
		for i := from + 499; i >= from; i-- {
			ids, tokens = append(ids, pending[i].ID), append(tokens, pending[i].LockedBy)
		}
		ids, tokens = append(ids, pending[from+500].ID), append(tokens, "n2/other")
		rec.take("")
		n, err := store.MarkDone(ctx, storage.MarkDoneParams{IDs: ids, Tokens: tokens, DoneAt: base, Delete: del})
		if err != nil || n != 500 {
			t.Fatalf("%s: MarkDone = %d, %v; want the 500 rows whose tokens match", name, n, err)
		}
		verb := "UPDATE"
		if del {
			verb = "DELETE"
		}
		stmts := rec.take(verb)
		if len(stmts) != 1 {
			t.Fatalf("%s: %d %s statements, want 1: %+v", name, len(stmts), verb, stmts)
		}
		checkPlan(t, name, stmts[0])
		// The other rows kept their claims.
		var left int
		if err := b.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+b.quoted()+" WHERE locked_by IS NOT NULL").Scan(&left); err != nil {
			t.Fatal(err)
		}
		if want := 3000 - 500 - from; left != want {
			t.Errorf("%s: %d rows claimed after it, want %d", name, left, want)
		}
	}
	check(t, "DONE update", 0, false)
	check(t, "DONE delete (DeleteDone)", 500, true)

	// A split of claimed events marks them with the same predicate, in its transaction.
	var p storage.FanOutParams
	p.DoneAt = base
	for _, e := range pending[1000:1500] {
		d := testEvent(outbox.DeliveryID(e.ID, "l1"), base)
		d.Listener = "l1"
		p.Events = append(p.Events, storage.FanOutEvent{ID: e.ID, Token: e.LockedBy, Deliveries: []outbox.Event{d}})
	}
	rec.take("")
	r, err := store.(storage.FanOutStore).FanOut(ctx, p)
	if err != nil || len(r.Split) != 500 {
		t.Fatalf("FanOut split %d, %v; want 500", len(r.Split), err)
	}
	stmts := rec.take("UPDATE")
	if len(stmts) != 1 {
		t.Fatalf("FanOut: %d UPDATE statements, want 1: %+v", len(stmts), stmts)
	}
	checkPlan(t, "FanOut", stmts[0])
}
