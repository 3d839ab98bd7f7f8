package outbox_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
	"github.com/outboxkit/outbox/internal/testdb"
)

// envelopeCase is one input of core's FuzzWriterEnvelope.
type envelopeCase struct {
	name                string
	typ, aggType, aggID string
	payload             []byte
	hk, hv              string
	delay               int64
}

// envelopeCorpus is FuzzWriterEnvelope's stored seed corpus plus payloads that
// json.Valid accepts and a database rejects, and their neighbours that every database
// stores.
func envelopeCorpus(t testing.TB) []envelopeCase {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "core", "testdata", "fuzz", "FuzzWriterEnvelope")
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var cases []envelopeCase
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		c, err := parseEnvelopeCorpusFile(b)
		if err != nil {
			t.Fatalf("%s: %v", f.Name(), err)
		}
		c.name = "corpus/" + f.Name()
		cases = append(cases, c)
	}
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	payloads := []string{
		`{"id":1}`, `null`, `["\\u0000", "\u0000"]`, `"\\\\u0000"`,
		`"\ud800"`, `"\udc00"`, `"\ud800x"`, `"\ud800\u0041"`, `"\ud800\ud800"`, `"\ude00\ud83d"`, `{"\udbff":1}`,
		`"\ud83d\ude00"`, `"\uD83D\uDE00"`, `"\\ud800"`, `"é😀\u00e9\u2028"`,
		"\"\xff\"", "[\"\xc3\"]", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "\"\xef\xbf\xbf\"",
		nest(31), nest(32), strings.Repeat(`{"a":`, 31) + "{}" + strings.Repeat("}", 31),
		`[1e131071, -9.9E+131071, 1.5e-16382, 0e-16383, -0, 1E400, 0.10]`, `1e131072`, `[1e-16384]`, `1.55e-16382`,
		`{"a":1,"a":2}`, " \t\r\n[]\n",
		// Numbers that PostgreSQL writes out in full: within the limit once written out,
		// and past it.
		`[1e900]`, `[1e1000]`, `[1e-900]`, `[-1.5E+10, 2e-3, 0.5e1, 12e-1]`, `[` + strings.Repeat(`1e9,`, 80) + `1]`,
		`[` + strings.Repeat(`1e9,`, 120) + `1]`,
		// Separators that jsonb's text form spaces out.
		`[` + strings.Repeat(`0,`, 500) + `0]`, `{` + strings.Repeat(`"a":{`, 30) + strings.Repeat(`}`, 30) + `}`,
	}
	for i, p := range payloads {
		cases = append(cases, envelopeCase{name: fmt.Sprintf("payload/%d", i), typ: "T", payload: []byte(p), hk: "k", hv: "v"})
	}
	for i, h := range []string{"\xed\xa0\x80", "\x00", "é😀", "\u2028"} {
		cases = append(cases, envelopeCase{name: fmt.Sprintf("header/%d", i), typ: "T", payload: []byte(`{}`), hk: "k", hv: h})
	}
	return cases
}

// parseEnvelopeCorpusFile reads a "go test fuzz v1" file of FuzzWriterEnvelope's
// arguments: typ, aggType, aggID string, payload []byte, hk, hv string, delay int64.
func parseEnvelopeCorpusFile(b []byte) (envelopeCase, error) {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 8 || lines[0] != "go test fuzz v1" {
		return envelopeCase{}, fmt.Errorf("not a FuzzWriterEnvelope corpus file: %q", b)
	}
	var s [7]string
	for i, l := range lines[1:] {
		open := strings.IndexByte(l, '(')
		if open < 0 || !strings.HasSuffix(l, ")") {
			return envelopeCase{}, fmt.Errorf("line %q", l)
		}
		v := l[open+1 : len(l)-1]
		if l[:open] == "int64" {
			s[i] = v
			continue
		}
		u, err := strconv.Unquote(v)
		if err != nil {
			return envelopeCase{}, fmt.Errorf("line %q: %w", l, err)
		}
		s[i] = u
	}
	delay, err := strconv.ParseInt(s[6], 0, 64)
	if err != nil {
		return envelopeCase{}, err
	}
	return envelopeCase{typ: s[0], aggType: s[1], aggID: s[2], payload: []byte(s[3]), hk: s[4], hv: s[5], delay: delay}, nil
}

// TestWriterAcceptsOnlyWhatEveryDatabaseStores replays FuzzWriterEnvelope's corpus
// and the surrogate, UTF-8, nesting and number cases through a Writer on SQLite,
// PostgreSQL and MariaDB (see envelopeChecker.check). FuzzWriteReadBack is the same
// check as a fuzz target.
func TestWriterAcceptsOnlyWhatEveryDatabaseStores(t *testing.T) {
	t.Parallel()
	cases := envelopeCorpus(t)
	ec := newEnvelopeChecker(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	accepted := 0
	for _, c := range cases {
		if ec.check(ctx, t, c) {
			accepted++
		}
	}
	t.Logf("%d envelopes, %d accepted", len(cases), accepted)
}

// FuzzWriteReadBack writes envelopes through the real stores of SQLite, PostgreSQL and
// MariaDB, in a transaction with a business row, and reads every accepted one back the
// way the poller and the admin do. Without -fuzz it runs envelopeCorpus; with it, for
// example `go test -run '^$' -fuzz FuzzWriteReadBack ./internal/roottest/core/`, it
// looks for payloads that a database stores but cannot return, or returns changed.
func FuzzWriteReadBack(f *testing.F) {
	for _, c := range envelopeCorpus(f) {
		f.Add(c.typ, c.aggType, c.aggID, c.payload, c.hk, c.hv, c.delay)
	}
	ec := newEnvelopeChecker(f)
	f.Fuzz(func(t *testing.T, typ, aggType, aggID string, payload []byte, hk, hv string, delay int64) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		ec.check(ctx, t, envelopeCase{name: "fuzz", typ: typ, aggType: aggType, aggID: aggID, payload: payload, hk: hk, hv: hv, delay: delay})
	})
}

// envelopeLimit is the MaxPayloadBytes of envelopeChecker's writers.
const envelopeLimit = 1024

// envelopeChecker writes envelopes on all three databases.
type envelopeChecker struct {
	bundles []sqlBundle
	writers []*outbox.Writer
}

func newEnvelopeChecker(tb testing.TB) *envelopeChecker {
	tb.Helper()
	pg, maria := testdb.NewPostgresDB(tb), testdb.NewMySQLDB(tb)
	bundles := []sqlBundle{
		setupStore(tb, testdb.NewSQLiteDB(tb), outbox.SQLite, outbox.DefaultTable),
		setupStore(tb, pg, outbox.Postgres, testdb.IsolatedTable(tb, pg, outbox.Postgres.Name())),
		setupStore(tb, maria, outbox.MySQL, testdb.IsolatedTable(tb, maria, outbox.MySQL.Name())),
	}
	ec := &envelopeChecker{bundles: bundles, writers: make([]*outbox.Writer, len(bundles))}
	for i, b := range bundles {
		ob, err := outbox.New(b.db, outbox.Config{Mode: outbox.WriterOnly, Dialect: b.d, Table: b.table, PurgeInterval: -1,
			MaxPayloadBytes: envelopeLimit, Logger: discardLogger()})
		if err != nil {
			tb.Fatal(err)
		}
		ec.writers[i] = ob.Writer()
	}
	return ec
}

// check writes c on every database and reports whether the writer accepted it. Every
// envelope the writer accepts must be stored by all three and read back equal (the
// payload as JSON) by Get and by Pending, the poller's read, and no larger than 1.5 ×
// MaxPayloadBytes (jsonb's separators; numbers are written out within the limit);
// every payload that PostgreSQL's jsonb or MariaDB's JSON_VALID rejects must be
// rejected by the writer first, with an *EnvelopeError; after a rejection the
// caller's transaction commits its business row.
func (ec *envelopeChecker) check(ctx context.Context, t *testing.T, c envelopeCase) bool {
	t.Helper()
	env := outbox.Envelope{Type: c.typ, AggregateType: c.aggType, AggregateID: c.aggID, Payload: c.payload,
		Headers: map[string]string{c.hk: c.hv}, DeliverAfter: time.Duration(c.delay)}
	pg, maria := ec.bundles[1].db, ec.bundles[2].db
	// What the databases make of the payload on its own.
	var dbRejects []string
	if _, err := pg.ExecContext(ctx, "SELECT CAST(CAST($1 AS TEXT) AS JSONB)", string(c.payload)); err != nil {
		dbRejects = append(dbRejects, "postgres: "+err.Error())
	}
	var valid sql.NullInt64
	if err := maria.QueryRowContext(ctx, "SELECT JSON_VALID(?)", string(c.payload)).Scan(&valid); err != nil {
		dbRejects = append(dbRejects, "mariadb: "+err.Error())
	} else if valid.Int64 != 1 {
		dbRejects = append(dbRejects, "mariadb: JSON_VALID = 0")
	}
	accepted := false
	for i, b := range ec.bundles {
		id, err := writeOne(ctx, b, ec.writers[i], env)
		if err != nil {
			var ee *outbox.EnvelopeError
			if !errors.As(err, &ee) || !errors.Is(err, outbox.ErrInvalidEnvelope) {
				t.Errorf("%s on %s: Write = %v, want it stored or an *EnvelopeError", c.name, b.d, err)
			}
			continue
		}
		accepted = true
		if dbRejects != nil {
			t.Errorf("%s on %s: the writer accepted payload %q, which the databases reject: %v", c.name, b.d, c.payload, dbRejects)
		}
		got, err := b.store.Get(ctx, id)
		if err != nil {
			t.Errorf("%s on %s: Get = %v", c.name, b.d, err)
			continue
		}
		if !jsonEqual(got.Payload, c.payload) {
			t.Errorf("%s on %s: payload %q read back as %q", c.name, b.d, c.payload, got.Payload)
		}
		if len(got.Payload) > envelopeLimit*3/2 {
			t.Errorf("%s on %s: a payload of %d bytes read back as %d, more than 1.5 × MaxPayloadBytes (%d)",
				c.name, b.d, len(c.payload), len(got.Payload), envelopeLimit)
		}
		want := env.AggregateType
		if want == "" {
			want = outbox.GlobalAggregateType
		}
		if got.Type != env.Type || got.AggregateType != want || got.AggregateID != env.AggregateID ||
			!reflect.DeepEqual(got.Headers, env.Headers) {
			t.Errorf("%s on %s: %+v read back as %+v", c.name, b.d, env, got)
		}
		// The poller's read of the due rows, and the move that takes the row out of it.
		batch, err := b.store.Pending(ctx, storage.PendingParams{Now: time.Now().Add(time.Duration(max(c.delay, 0)) + time.Hour), Limit: 1000})
		if err != nil {
			t.Errorf("%s on %s: Pending = %v", c.name, b.d, err)
		}
		if len(batch.Undecodable) > 0 {
			t.Errorf("%s on %s: Pending reports undecodable rows: %v", c.name, b.d, batch.Undecodable)
		}
		if _, err := b.store.MarkDead(ctx, storage.MarkDeadParams{ID: id, DeadAt: time.Now(), Reason: "read back"}); err != nil {
			t.Errorf("%s on %s: MarkDead = %v", c.name, b.d, err)
		}
	}
	return accepted
}

// writeOne writes env in its own committed transaction, with a business row after it:
// a refused envelope must leave the transaction usable, so the business row commits
// either way and only the event's error is returned.
func writeOne(ctx context.Context, b sqlBundle, w *outbox.Writer, env outbox.Envelope) (string, error) {
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return "", err
	}
	defer func() { _ = tx.Rollback() }()
	id, werr := w.Write(ctx, tx, env)
	// A statement that does nothing, in the same transaction: PostgreSQL refuses every
	// statement of a transaction in which one failed.
	if _, err := tx.ExecContext(ctx, "SELECT 1"); err != nil {
		return "", fmt.Errorf("the transaction is not usable after Write = %v: %w", werr, err)
	}
	if werr != nil {
		return "", werr
	}
	return id, tx.Commit()
}

// jsonEqual reports whether two JSON texts hold the same value: objects compare as
// maps (the last of duplicate keys wins, as in jsonb), numbers by value.
func jsonEqual(a, b []byte) bool {
	va, ok1 := decodeJSON(a)
	vb, ok2 := decodeJSON(b)
	return ok1 && ok2 && reflect.DeepEqual(va, vb)
}

func decodeJSON(b []byte) (any, bool) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, false
	}
	return canonicalNumbers(v), true
}

// canonicalNumbers replaces every json.Number by its value in a canonical text form.
func canonicalNumbers(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = canonicalNumbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = canonicalNumbers(e)
		}
	case json.Number:
		return canonicalNumber(string(v))
	}
	return v
}

// canonicalNumber writes a JSON number as sign, significant digits and exponent:
// "1E2", "100" and "100.0" are all "+1e2"; every zero is "0".
func canonicalNumber(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant = s[:i]
		e, err := strconv.Atoi(s[i+1:])
		if err != nil {
			return "bad:" + s
		}
		exp = e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := intPart + frac
	exp -= len(frac)
	trimmed := strings.TrimRight(digits, "0")
	exp += len(digits) - len(trimmed)
	trimmed = strings.TrimLeft(trimmed, "0")
	if trimmed == "" {
		return "0"
	}
	sign := "+"
	if neg {
		sign = "-"
	}
	return fmt.Sprintf("%s%se%d", sign, trimmed, exp)
}
