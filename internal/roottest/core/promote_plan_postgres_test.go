package outbox_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// TestPostgresPromoteCostsTheKeysNotTheBacklog runs the promotes of a dispatcher (by
// key, after DONE outcomes) and of a writer (by ID, after its commit) on keys with 400
// events waiting each, and checks with EXPLAIN ANALYZE that no part of the plan runs
// once per waiting event: a promote finds each key's next event with one probe of the
// order index. Comparing every waiting event with its key's minimum instead ran a probe
// per waiting event, and the table's WAITING rows were scanned and matched against the
// heads: a promote cost as much as the backlog, each event of a busy key paid it, and
// ordered crash scenarios of the fault harness drained a backlog slower and slower.
func TestPostgresPromoteCostsTheKeysNotTheBacklog(t *testing.T) {
	t.Parallel()
	b := setupPostgres(t)
	ctx := t.Context()
	base := time.Date(2031, 6, 1, 0, 0, 0, 0, time.UTC)

	store, rec := tracedPostgresStore(t, b)
	orders := store.(storage.OrderStore)

	// 24 keys of 400 events: each key's first NEW, the others WAITING.
	const keys, perKey = 24, 400
	key := func(k int) string { return fmt.Sprintf("k%02d", k) }
	id := func(k, i int) string { return fmt.Sprintf("e%02d-%04d", k, i) }
	for i := range perKey {
		events := make([]outbox.Event, keys)
		for k := range keys {
			events[k] = testEvent(id(k, i), base)
			events[k].OrderKey = key(k)
		}
		if _, err := b.store.Insert(ctx, b.db, storage.InsertParams{Events: events}); err != nil {
			t.Fatal(err)
		}
	}
	// The first event of every key is delivered.
	var firsts []string
	for k := range keys {
		firsts = append(firsts, id(k, 0))
	}
	if n, err := b.store.MarkDone(ctx, storage.MarkDoneParams{IDs: firsts, DoneAt: base}); err != nil || n != keys {
		t.Fatalf("MarkDone = %d, %v", n, err)
	}
	if _, err := b.db.ExecContext(ctx, "ANALYZE "+b.quoted()); err != nil {
		t.Fatal(err)
	}

	loops := regexp.MustCompile(`loops=(\d+)`)
	// run promotes p for real (recording its statement), then EXPLAIN ANALYZEs that
	// statement with its arguments rewritten by swap, in a transaction rolled back.
	run := func(t *testing.T, name string, p storage.PromoteParams, want int64, swap map[string]string) {
		t.Helper()
		rec.take("")
		res, err := orders.Promote(ctx, p)
		if err != nil || res.Promoted != want || int64(len(res.Events)) != want {
			t.Fatalf("%s: promoted %d, read %d, %v; want %d", name, res.Promoted, len(res.Events), err, want)
		}
		stmts := rec.take("WITH h AS")
		if len(stmts) != 1 {
			t.Fatalf("%s: %d promote statements, want 1", name, len(stmts))
		}
		args := make([]any, len(stmts[0].args))
		for i, a := range stmts[0].args {
			args[i] = a
			if s, ok := a.(string); ok && swap[s] != "" {
				args[i] = swap[s]
			}
		}
		tx, err := b.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		rows, err := tx.QueryContext(ctx, "EXPLAIN (ANALYZE, COSTS OFF) "+stmts[0].sql, args...)
		if err != nil {
			t.Fatalf("%s: explain: %v", name, err)
		}
		var plan strings.Builder
		promoted := false
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan.WriteString(line + "\n")
			if strings.HasPrefix(strings.TrimSpace(line), "Update on") && !strings.Contains(line, "rows=0 ") {
				promoted = true
			}
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		if !promoted {
			t.Fatalf("%s: the explained promote changed no row (the test is wrong):\n%s", name, plan.String())
		}
		for _, m := range loops.FindAllStringSubmatch(plan.String(), -1) {
			if n, _ := strconv.Atoi(m[1]); n > 2*keys {
				t.Errorf("%s: a plan node runs %d times with %d events waiting per key; it must run at most once or twice per key:\n%s",
					name, n, perKey, plan.String())
				break
			}
		}
		if regexp.MustCompile(`Seq Scan on ` + regexp.QuoteMeta(b.table[strings.LastIndex(b.table, ".")+1:]) + `( |$)`).MatchString(plan.String()) {
			t.Errorf("%s: scans the event table:\n%s", name, plan.String())
		}
	}
	half := func(from int) (ks []string) {
		for k := from; k < from+keys/2; k++ {
			ks = append(ks, key(k))
		}
		return ks
	}
	// After DONE outcomes: the dispatcher's promote by key, read back and claimed.
	literal := func(ks []string) string { return `{"` + strings.Join(ks, `","`) + `"}` } // as the store binds them
	run(t, "by key", storage.PromoteParams{Keys: half(0), DeadBlocks: true, Read: true, Token: "n1/t", TTL: time.Minute},
		keys/2, map[string]string{literal(half(0)): literal(half(keys / 2))})
	// After a commit: the writer's promote of its events by ID, explained with the next
	// events of the first half, whose second events are delivered meanwhile.
	var ids, next, seconds []string
	for k := range keys / 2 {
		ids = append(ids, id(k+keys/2, 1))
		seconds = append(seconds, id(k, 1))
		next = append(next, id(k, 2))
	}
	if n, err := b.store.MarkDone(ctx, storage.MarkDoneParams{IDs: seconds, DoneAt: base}); err != nil || n != keys/2 {
		t.Fatalf("MarkDone = %d, %v", n, err)
	}
	run(t, "by ID", storage.PromoteParams{IDs: ids, DeadBlocks: true, Token: "n1/w", TTL: time.Minute, Read: true},
		keys/2, map[string]string{literal(ids): literal(next)})
}
