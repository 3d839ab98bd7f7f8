package sqlstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outbox/core/internal/check"
	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// ListQueryCase is one statement of the admin's lists as a dialect builds it, with the
// index its plan must use: core/internal/sqlstore/testdata/list_queries.json holds them, and the plan
// test on the three databases (internal/roottest/core) EXPLAINs each one.
type listQueryCase struct {
	Dialect string    `json:"dialect"`
	Name    string    `json:"name"`
	SQL     string    `json:"sql"`
	Args    []listArg `json:"args"`
	Use     string    `json:"use"` // the index suffixes the plan may name, separated by |
}

// listArg is one argument: a string, an integer or a time (Go's time.Time on
// PostgreSQL and MySQL; SQLite's are text already).
type listArg struct {
	S *string    `json:"s,omitempty"`
	I *int64     `json:"i,omitempty"`
	T *time.Time `json:"t,omitempty"`
}

// undeliveredIndex is use, an index suffix or several joined by "|", with the pending
// index read as the undelivered index on PostgreSQL, which replaced it there.
func (d *dialect) undeliveredIndex(use string) string {
	if d != postgresDialect {
		return use
	}
	return strings.ReplaceAll(use, pendingIndexSuffix, undeliveredIndexSuffix)
}

// listQueryCases builds every list statement of every dialect for a table of 1 M rows
// whose created times run from t0 (see the plan test).
func listQueryCases(t *testing.T) []listQueryCase {
	tn, err := parseTableName("outbox_event")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	mid := outboxtype.Cursor{CreatedAt: t0.Add(500000 * time.Millisecond), ID: "e-0500000"}
	type spec struct {
		name string
		p    storage.ListEventsParams
		// index (suffix) on PostgreSQL and SQLite, and on MySQL
		use, useMySQL string
	}
	specs := []spec{
		{"new", storage.ListEventsParams{Status: outboxtype.StatusNew}, pendingIndexSuffix, deadIndexSuffix},
		{"new after", storage.ListEventsParams{Status: outboxtype.StatusNew, After: mid}, pendingIndexSuffix, deadIndexSuffix},
		// PostgreSQL may walk the pending index (NEW and RETRY rows) in order instead,
		// filtering status = 2, when its statistics say RETRY rows are common there (a
		// table before version 10: the undelivered index that replaced it is not for
		// queries that do not write its attempts >= 0).
		{"retry", storage.ListEventsParams{Status: outboxtype.StatusRetry}, stateIndexSuffix + "|" + pendingIndexSuffix, deadIndexSuffix},
		{"waiting newest", storage.ListEventsParams{Status: outboxtype.StatusWaiting, Newest: true}, stateIndexSuffix, deadIndexSuffix},
		{"dead type", storage.ListEventsParams{Status: outboxtype.StatusDead, EventFilter: outboxtype.EventFilter{EventType: "T3"}}, deadIndexSuffix, deadIndexSuffix},
		{"dead error", storage.ListEventsParams{Status: outboxtype.StatusDead, After: mid, EventFilter: outboxtype.EventFilter{ErrorContains: "timeout"}}, deadIndexSuffix, deadIndexSuffix},
		{"dead time range", storage.ListEventsParams{Status: outboxtype.StatusDead, EventFilter: outboxtype.EventFilter{From: mid.CreatedAt, To: mid.CreatedAt.Add(time.Hour)}}, deadIndexSuffix, deadIndexSuffix},
		{"done newest", storage.ListEventsParams{Status: outboxtype.StatusDone, Newest: true}, finishedIndexSuffix, finishedIndexSuffix},
		{"done time range, type", storage.ListEventsParams{Status: outboxtype.StatusDone, EventFilter: outboxtype.EventFilter{EventType: "T1", From: mid.CreatedAt}}, finishedIndexSuffix, finishedIndexSuffix},
		{"discarded", storage.ListEventsParams{Status: outboxtype.StatusDiscarded}, finishedIndexSuffix, finishedIndexSuffix},
		{"aggregate", storage.ListEventsParams{Status: outboxtype.StatusDone, EventFilter: outboxtype.EventFilter{AggregateID: "agg-42"}}, aggregateListIndexSuffix, aggregateListIndexSuffix},
		{"aggregate, aggregate type", storage.ListEventsParams{Status: outboxtype.StatusNew, EventFilter: outboxtype.EventFilter{AggregateID: "agg-42", AggregateType: "Thing"}}, aggregateListIndexSuffix, aggregateListIndexSuffix},
		{"retry type newest", storage.ListEventsParams{Status: outboxtype.StatusRetry, Newest: true, EventFilter: outboxtype.EventFilter{EventType: "T1"}},
			stateIndexSuffix + "|" + pendingIndexSuffix, deadIndexSuffix},
		{"retry after", storage.ListEventsParams{Status: outboxtype.StatusRetry, After: mid}, stateIndexSuffix + "|" + pendingIndexSuffix, deadIndexSuffix},
		{"waiting newest after", storage.ListEventsParams{Status: outboxtype.StatusWaiting, Newest: true, After: mid}, stateIndexSuffix, deadIndexSuffix},
		// Blocking: the list's index, each row's key probed in the order index.
		{"dead blocking", storage.ListEventsParams{Status: outboxtype.StatusDead, EventFilter: outboxtype.EventFilter{Blocking: true}}, deadIndexSuffix, deadIndexSuffix},
		{"retry blocking newest", storage.ListEventsParams{Status: outboxtype.StatusRetry, Newest: true, EventFilter: outboxtype.EventFilter{Blocking: true}},
			stateIndexSuffix + "|" + pendingIndexSuffix, deadIndexSuffix},
		// The plan test's WAITING rows (i % 100 = 98) each have a key of their own, "k-<i>".
		{"order key", storage.ListEventsParams{Status: outboxtype.StatusWaiting, EventFilter: outboxtype.EventFilter{OrderKey: "k-500098"}}, orderIndexSuffix, orderIndexSuffix},
		{"order key after, type", storage.ListEventsParams{Status: outboxtype.StatusWaiting, After: outboxtype.Cursor{OrderSeq: 1, ID: "e-0500098"},
			EventFilter: outboxtype.EventFilter{OrderKey: "k-500098", EventType: "T3"}}, orderIndexSuffix, orderIndexSuffix},
	}
	var out []listQueryCase
	for _, d := range []*dialect{postgresDialect, mysqlDialect, sqliteDialect} {
		for _, s := range specs {
			p := s.p
			p.Limit, p.ScanLimit = 51, maxScanRows
			use := s.use
			if d == mysqlDialect {
				use = s.useMySQL
			}
			use = d.undeliveredIndex(use)
			pl := d.listPlan(tn, p)
			add := func(kind string, q query, err error) {
				if err != nil {
					t.Fatal(err)
				}
				c := listQueryCase{Dialect: d.name, Name: s.name + " " + kind, SQL: q.SQL, Use: use}
				for _, a := range q.Args {
					switch v := a.(type) {
					case string:
						c.Args = append(c.Args, listArg{S: &v})
					case int64:
						c.Args = append(c.Args, listArg{I: &v})
					case time.Time:
						c.Args = append(c.Args, listArg{T: &v})
					default:
						t.Fatalf("%s: argument %T", c.Name, a)
					}
				}
				out = append(out, c)
			}
			if pl.window {
				q, err := d.listWindowQuery(tn, pl, p)
				add("(window)", q, err)
			}
			bound := &outboxtype.Cursor{CreatedAt: t0.Add(900000 * time.Millisecond), ID: "e-0900000"}
			if p.Newest {
				bound = &outboxtype.Cursor{CreatedAt: t0.Add(100000 * time.Millisecond), ID: "e-0100000"}
			}
			if pl.seq {
				bound = &outboxtype.Cursor{OrderSeq: 1, ID: "e-0900098"}
			}
			if !pl.window {
				bound = nil
			}
			q, err := d.listPageQuery(tn, pl, p, bound)
			add("(page)", q, err)
		}
		// The counts of the overview and of the Dead tab (Events.Count): a
		// windowed one reads its window's end, then counts up to it.
		// end is where a count's window ends in the plan test's table: its 10,000th row,
		// the row i whose index holds per100 rows of every 100 (the statuses by i % 100
		// of fillSQL); finished lists are in finish time, a second after creation.
		end := func(per100 int, finished bool) *outboxtype.Cursor {
			i := 10000 * 100 / per100
			if finished { // newest first: from the end of a million rows
				i = 1000000 - i
			}
			c := &outboxtype.Cursor{CreatedAt: t0.Add(time.Duration(i) * time.Millisecond), ID: fmt.Sprintf("e-%07d", i)}
			if finished && d != mysqlDialect {
				c.CreatedAt = c.CreatedAt.Add(time.Second)
			}
			return c
		}
		for _, c := range []struct {
			name          string
			p             storage.CountEventsParams
			use, useMySQL string
			bound, mysql  *outboxtype.Cursor
		}{
			{"new", storage.CountEventsParams{Status: outboxtype.StatusNew, Groups: true}, pendingIndexSuffix, deadIndexSuffix, end(7, false), end(5, false)},
			{"retry", storage.CountEventsParams{Status: outboxtype.StatusRetry, Groups: true}, stateIndexSuffix + "|" + pendingIndexSuffix, deadIndexSuffix,
				end(2, false), end(2, false)},
			{"waiting", storage.CountEventsParams{Status: outboxtype.StatusWaiting, Groups: true}, stateIndexSuffix, deadIndexSuffix, end(1, false), end(1, false)},
			{"dead", storage.CountEventsParams{Status: outboxtype.StatusDead, Groups: true}, deadIndexSuffix, deadIndexSuffix, end(1, false), end(1, false)},
			{"done", storage.CountEventsParams{Status: outboxtype.StatusDone, Groups: true}, finishedIndexSuffix, deadIndexSuffix, end(92, true), end(90, true)},
			{"fallback", storage.CountEventsParams{Status: outboxtype.StatusFallback, Groups: true}, finishedIndexSuffix, deadIndexSuffix, end(92, true), end(1, true)},
			{"discarded", storage.CountEventsParams{Status: outboxtype.StatusDiscarded, Groups: true}, finishedIndexSuffix, deadIndexSuffix, end(92, true), end(1, true)},
			{"dead type", storage.CountEventsParams{Status: outboxtype.StatusDead, EventFilter: outboxtype.EventFilter{EventType: "T3", Listener: "mail"}, Groups: true},
				deadIndexSuffix, deadIndexSuffix, end(1, false), end(1, false)},
			{"dead aggregate type", storage.CountEventsParams{Status: outboxtype.StatusDead, EventFilter: outboxtype.EventFilter{AggregateType: "Thing"}},
				deadIndexSuffix, deadIndexSuffix, end(1, false), end(1, false)},
			{"dead error", storage.CountEventsParams{Status: outboxtype.StatusDead, EventFilter: outboxtype.EventFilter{ErrorContains: "Timeout"}, Groups: true},
				deadIndexSuffix, deadIndexSuffix, end(1, false), end(1, false)},
		} {
			p := c.p
			p.ScanLimit = maxCountRows
			use := c.use
			if d == mysqlDialect {
				use = c.useMySQL
			}
			use = d.undeliveredIndex(use)
			pl := d.countPlan(tn, p)
			add := func(kind string, q query, err error) {
				if err != nil {
					t.Fatal(err)
				}
				lc := listQueryCase{Dialect: d.name, Name: "count " + c.name + " " + kind, SQL: q.SQL, Use: use}
				for _, a := range q.Args {
					switch v := a.(type) {
					case string:
						lc.Args = append(lc.Args, listArg{S: &v})
					case int64:
						lc.Args = append(lc.Args, listArg{I: &v})
					case time.Time:
						lc.Args = append(lc.Args, listArg{T: &v})
					default:
						t.Fatalf("%s: argument %T", lc.Name, a)
					}
				}
				out = append(out, lc)
			}
			q, err := d.countWindowQuery(tn, pl, p)
			add("(window)", q, err)
			bound := c.bound
			if d == mysqlDialect {
				bound = c.mysql
			}
			q, err = d.countQuery(tn, pl, p, bound)
			add("(count)", q, err)
		}
		q := d.blockedKeysWindowQuery(tn, maxCountRows)
		lc := listQueryCase{Dialect: d.name, Name: "blocked keys (keys)", SQL: q.SQL, Use: orderIndexSuffix}
		for _, a := range q.Args {
			v := a.(int64)
			lc.Args = append(lc.Args, listArg{I: &v})
		}
		out = append(out, lc)
	}
	return out
}

// TestListQueriesGolden pins the list statements in core/internal/sqlstore/testdata/list_queries.json,
// which the plan test EXPLAINs on each database (OUTBOX_UPDATE_MIGRATIONS=1 rewrites it).
func TestListQueriesGolden(t *testing.T) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(listQueryCases(t)); err != nil {
		t.Fatal(err)
	}
	got := buf.Bytes()
	path := filepath.Join("testdata", "list_queries.json")
	if os.Getenv("OUTBOX_UPDATE_MIGRATIONS") == "1" {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the statements the dialects build: run OUTBOX_UPDATE_MIGRATIONS=1 go test -run TestListQueriesGolden ./core/internal/sqlstore/", path)
	}
}

// TestErrorPrefilter: the LIKE pattern that narrows an ErrorContains list lowers ASCII
// letters, escapes the wildcards, and makes every character whose fold orbit leaves
// ASCII (any non-ASCII one, k and s) a %, so that it selects every row MatchesError
// accepts whatever the database's LOWER does beyond ASCII.
func TestErrorPrefilter(t *testing.T) {
	for in, want := range map[string]string{
		"Timeout":       "%timeout%",
		"100%_sure!":    "%100!%!_%ure!!%",
		"Connection":    "%connection%",
		"Straße":        "%tra%e%",
		"Échec délai":   "%chec d%lai%",
		"kelvin":        "%elvin%",
		"ÜBERLASTUNG":   "%berla%tung%",
		"ĞĞ":            "%",
		"s":             "%",
		"a_b":           "%a!_b%",
		"Disk full, ok": "%di% full, o%",
	} {
		if got := check.ErrorPrefilter(in); got != want {
			t.Errorf("check.ErrorPrefilter(%q) = %q, want %q", in, got, want)
		}
	}
	f := outboxtype.EventFilter{ErrorContains: "ÉCHEC"}
	for s, want := range map[string]bool{"échec": true, "Échec": true, "echec": false, "x ÉcHeC y": true, "": false, "éche": false} {
		if got := f.MatchesError(s); got != want {
			t.Errorf("MatchesError(%q) with %q = %v, want %v", s, f.ErrorContains, got, want)
		}
	}
}

// The bounds package outbox passes as ScanLimit: outbox.MaxScanRows for a list page,
// outbox.MaxCountRows for a count.
const (
	maxScanRows  = 10000
	maxCountRows = 10_000
)
