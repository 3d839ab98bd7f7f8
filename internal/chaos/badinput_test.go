package chaos

// The bad-input table of docs/RELIABILITY.md: every place where the library reads
// input it does not control (envelopes from business code, rows read back from the
// table, table names from configuration, the admin API's query strings and bodies) is
// fed mutated inputs, and each input must be accepted, or rejected cleanly with the
// documented error, never crash (panic, hang, or a 5xx from the admin API). The go
// test -fuzz targets (core: FuzzWriterEnvelope, FuzzValidateTableName, FuzzDecodeHeaders,
// FuzzDecodeTime, FuzzDecodeRow, FuzzStoredRow; admin: FuzzParseListQuery,
// FuzzAdminRequest) explore the same inputs with coverage guidance; this test
// regenerates the table's counts from a seed, through the public API only:
// badInputsShort inputs per target in the short tier, badInputsLong in the long tier (a
// quarter of those for the targets that need a database round trip per input).

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	outboxadmin "github.com/outboxkit/outbox/admin"
	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
	"github.com/outboxkit/outbox/core/storage"
	"github.com/outboxkit/outbox/internal/testdb"
)

// Inputs per bad-input target.
const (
	badInputsShort = 300
	badInputsLong  = 20000
)

// mutator derives inputs from seeds with random edits, deterministically from a seed.
type mutator struct {
	rng   *rand.Rand
	seeds []string
}

// tokens are fragments that tend to find bugs in parsers of JSON, times, identifiers
// and query strings.
var tokens = []string{
	"\x00", "\xff", "\xfe\xff", "\xc3", "é", "𝄞", "\u2028", "\\", "\\u0000", "\\ud800", `"`, "'", "`", ";", "--", "/*",
	"{", "}", "[", "]", ":", ",", "null", "true", "1e999", "-0", "9999999999999999999999", "NaN",
	".", "..", "%", "%00", "%zz", "%2F", "&", "=", "+", " ", "\t", "\n", "\r\n",
	"T", "Z", "+05:45", "-03:30", "9999-12-31", "0000-01-01", "2026-02-30", "24:00:00", ".9999999999",
	"limit", "after", "event_type", "aggregate_type", "by", "outbox_event", "a.b.c", strings.Repeat("x", 70),
}

// next returns one input: a seed with 1 to 3 edits, or, one time in five, up to 8.
func (m *mutator) next() string {
	b := []byte(m.seeds[m.rng.IntN(len(m.seeds))])
	edits := 1 + m.rng.IntN(3)
	if m.rng.IntN(5) == 0 {
		edits = 1 + m.rng.IntN(8)
	}
	for range edits {
		switch op := m.rng.IntN(7); {
		case op == 0 && len(b) > 0: // flip a byte
			b[m.rng.IntN(len(b))] ^= byte(1 << m.rng.IntN(8))
		case op == 1 && len(b) > 0: // delete a span
			i := m.rng.IntN(len(b))
			j := min(len(b), i+1+m.rng.IntN(4))
			b = append(b[:i:i], b[j:]...)
		case op == 2: // insert a token
			i := m.rng.IntN(len(b) + 1)
			tok := tokens[m.rng.IntN(len(tokens))]
			b = append(b[:i:i], append([]byte(tok), b[i:]...)...)
		case op == 3 && len(b) > 0: // duplicate a span
			i := m.rng.IntN(len(b))
			j := min(len(b), i+1+m.rng.IntN(16))
			k := m.rng.IntN(len(b) + 1)
			span := append([]byte(nil), b[i:j]...)
			b = append(b[:k:k], append(span, b[k:]...)...)
		case op == 4: // splice another seed
			o := m.seeds[m.rng.IntN(len(m.seeds))]
			if len(o) > 0 {
				i := m.rng.IntN(len(b) + 1)
				b = append(b[:i:i], o[m.rng.IntN(len(o)):]...)
			}
		case op == 5 && len(b) > 0: // replace a byte with a random one
			b[m.rng.IntN(len(b))] = byte(m.rng.IntN(256))
		default: // truncate
			if len(b) > 0 {
				b = b[:m.rng.IntN(len(b))]
			}
		}
	}
	return string(b)
}

// badInputTarget is one place the library reads input.
type badInputTarget struct {
	name  string
	seeds []string
	// slow targets (a database round trip per input) get a quarter of the inputs.
	slow bool
	// setup prepares the target once and returns the function that feeds it one
	// input, reporting whether it was rejected. A wrong error fails the test there.
	setup func(t *testing.T) func(t *testing.T, in string) (rejected bool)
}

// TestBadInput feeds each target mutated inputs and publishes its counts.
func TestBadInput(t *testing.T) {
	seed := Seed(t)
	n := badInputsShort
	if Long() {
		n = badInputsLong
	}
	for i, target := range badInputTargets() {
		t.Run(strings.ReplaceAll(target.name, " ", "_"), func(t *testing.T) {
			t.Parallel()
			m := &mutator{rng: Rand(seed + int64(i)), seeds: target.seeds}
			n := n
			if target.slow {
				n /= 4
			}
			feed := target.setup(t)
			start := time.Now()
			res := Result{Kind: KindBadInput, Target: target.name, Seed: seed}
			for range n {
				in := m.next()
				res.Inputs++
				rejected, crashed := runInput(t, feed, in)
				switch {
				case crashed:
					res.Crashes++
				case rejected:
					res.Rejected++
				}
			}
			res.Seconds = time.Since(start).Seconds()
			t.Logf("%s: %d inputs, %d rejected cleanly, %d accepted, %d crashes", target.name, res.Inputs, res.Rejected,
				res.Inputs-res.Rejected-res.Crashes, res.Crashes)
			Publish(t, res)
		})
	}
}

// runInput feeds one input, turning a panic or an input that takes over 10 s into a
// crash (and a test failure).
func runInput(t *testing.T, feed func(*testing.T, string) bool, in string) (rejected, crashed bool) {
	t.Helper()
	start := time.Now()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("input %q: panic: %v", in, r)
			crashed = true
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("input %q took %s", in, d)
			crashed = true
		}
	}()
	return feed(t, in), false
}

// badInputTargets are the places the library reads input it does not control.
func badInputTargets() []badInputTarget {
	return []badInputTarget{
		{
			name:  "table name validation",
			seeds: []string{"outbox_event", "app.outbox_event", "_x", "A1.b2", "a b", `x"y`, "a.b.c", ""},
			setup: func(t *testing.T) func(*testing.T, string) bool {
				return func(t *testing.T, in string) bool {
					// New validates the table name (and does no I/O).
					_, err := outbox.New(new(sql.DB), outbox.Config{Mode: outbox.WriterOnly, Dialect: outbox.SQLite, Table: in, PurgeInterval: -1})
					var ce *outbox.ConfigError
					if err != nil && (!errors.As(err, &ce) || ce.Field != "Table") {
						t.Errorf("New with Table %q = %v, want a Table ConfigError", in, err)
					}
					return err != nil
				}
			},
		},
		{
			name: "envelope encoding",
			seeds: []string{`{"id":1}`, `[1,2,3]`, `"text"`, `null`, `{"a":{"b":[true,false,null]}}`, `1.5e3`,
				`"\u00e9\ud83d\ude00"`, `{"k":"\\u0000"}`},
			setup: setupEnvelopeTarget,
		},
		{
			name: "headers column decoding",
			slow: true,
			seeds: []string{`{"trace":"abc"}`, `{}`, `null`, `{"a":"b","c":"d"}`, `{"k":"\u00e9"}`, `[]`, `{"a":1}`,
				`{"a":"b","a":"c"}`},
			setup: func(t *testing.T) func(*testing.T, string) bool {
				row := setupStoredRowTarget(t)
				return func(t *testing.T, in string) bool {
					return row(t, storedRow{payload: `{}`, headers: in, created: "2026-01-02T03:04:05.000000Z"})
				}
			},
		},
		{
			name: "stored row decoding",
			slow: true,
			seeds: []string{"{}\x01{\"k\":\"v\"}\x012026-01-02T03:04:05.000000Z", "[1]\x01\x012026-01-02 03:04:05",
				"\"x\"\x01null\x012026-01-02T03:04:05+05:45", "1\x01{}\x012026-01-02 03:04:05.123 -0330 NDT",
				"{\"a\":\x01{\x010001-01-01T00:00:00Z"},
			setup: func(t *testing.T) func(*testing.T, string) bool {
				row := setupStoredRowTarget(t)
				return func(t *testing.T, in string) bool {
					parts := strings.SplitN(in, "\x01", 3)
					for len(parts) < 3 {
						parts = append(parts, "")
					}
					return row(t, storedRow{payload: parts[0], headers: parts[1], created: parts[2]})
				}
			},
		},
		{
			name: "admin query parser",
			seeds: []string{"limit=50&event_type=OrderPlaced&aggregate_type=Order", "limit=1", "after=MjAyNi0wMS0wMVQwMDowMDowMFp8eA",
				"event_type=%C3%A9", "by=event_type", "limit=500&after=", "a=1&a=2", ""},
			setup: func(t *testing.T) func(*testing.T, string) bool {
				h := adminHandler(t)
				return func(t *testing.T, in string) bool {
					path := "/api/dead-events"
					if strings.Contains(in, "by=") {
						path += "/count"
					}
					code, body := serve(h, http.MethodGet, path, in, "", nil)
					return checkAdminAnswer(t, "GET "+path+"?"+in, code, body)
				}
			},
		},
		{
			name: "admin request body",
			seeds: []string{`{}`, `{"event_type":"T"}`, `{"event_type":"T","aggregate_type":"A"}`, `{"x":1}`, `{"event_type":1}`,
				`{} {}`, `[]`, `{"event_type":"` + strings.Repeat("x", 200) + `"}`},
			setup: func(t *testing.T) func(*testing.T, string) bool {
				h := adminHandler(t)
				return func(t *testing.T, in string) bool {
					ct := "application/json"
					if len(in) > 0 && in[0]%7 == 0 {
						ct = "text/plain"
					}
					code, body := serve(h, http.MethodPost, "/api/dead-events/replay", "", ct, []byte(in))
					return checkAdminAnswer(t, "POST replay "+in, code, body)
				}
			},
		},
	}
}

// badTx is a transaction that writes nowhere: the writer validates envelopes before
// the store sees them.
type badTx struct{}

func (badTx) ExecContext(context.Context, string, ...any) (sql.Result, error) {
	return nil, errors.New("not used")
}

func (badTx) QueryContext(context.Context, string, ...any) (*sql.Rows, error) {
	return nil, errors.New("not used")
}
func (badTx) Commit() error   { return nil }
func (badTx) Rollback() error { return nil }

// setupEnvelopeTarget writes envelopes whose payload is the input and whose other
// fields are cut from it, through a Writer over an in-memory store. A rejection must be
// an *EnvelopeError; an accepted envelope must be stored with a valid JSON payload.
func setupEnvelopeTarget(t *testing.T) func(*testing.T, string) bool {
	store := outboxtest.NewMemoryStore()
	ob, err := outbox.New(nil, outbox.Config{Mode: outbox.WriterOnly, Store: store, PurgeInterval: -1,
		MaxPayloadBytes: 4096, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	w := ob.Writer()
	return func(t *testing.T, in string) bool {
		typ, agg, hk, hv := "T", "", "k", "v"
		if len(in) > 3 {
			typ, agg, hk, hv = in[:len(in)/4], in[len(in)/4:len(in)/3], in[len(in)/3:len(in)/2], in[len(in)/2:]
		}
		env := outbox.Envelope{Type: typ, AggregateType: agg, Payload: json.RawMessage(in), Headers: map[string]string{hk: hv},
			DeliverAfter: time.Duration(len(in)%5-1) * time.Second}
		id, err := w.Write(context.Background(), badTx{}, env)
		if err != nil {
			var ee *outbox.EnvelopeError
			if !errors.As(err, &ee) || !errors.Is(err, outbox.ErrInvalidEnvelope) {
				t.Errorf("Write(%q) = %v, want an *EnvelopeError", in, err)
			}
			return true
		}
		e, err := store.Get(context.Background(), id)
		if err != nil || !json.Valid(e.Payload) || !utf8.ValidString(e.Type) {
			t.Errorf("accepted %q stored as %+v, %v", in, e, err)
		}
		return false
	}
}

// storedRow is what the table holds for one event, as text.
type storedRow struct{ payload, headers, created string }

// setupStoredRowTarget writes rows straight into an SQLite table (which stores any
// text) and reads them through the store: Get (lenient) and Pending (strict). A row
// that does not decode must come back as a RowError, and a decoded one must carry a
// valid JSON payload. It reports a row as rejected when either read refuses it.
func setupStoredRowTarget(t *testing.T) func(*testing.T, storedRow) bool {
	db := testdb.NewSQLiteDB(t)
	ctx := context.Background()
	if err := outbox.Migrate(ctx, db, outbox.SQLite); err != nil {
		t.Fatal(err)
	}
	store, err := outbox.NewSQLStore(db, outbox.SQLite, outbox.SQLStoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	far := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	return func(t *testing.T, r storedRow) bool {
		id := outbox.NewID()
		var h any
		if r.headers != "" {
			h = r.headers
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO outbox_event (event_id, event_type, aggregate_type, payload, headers,
			status, attempts, available_at, created_at) VALUES (?, 'T', 'A', ?, ?, 0, 0, '2000-01-01T00:00:00.000000Z', ?)`,
			id, r.payload, h, r.created); err != nil {
			t.Fatalf("insert: %v", err)
		}
		defer func() {
			if _, err := db.ExecContext(ctx, `DELETE FROM outbox_event`); err != nil {
				t.Fatal(err)
			}
		}()
		isRowError := func(err error) bool {
			var re outbox.RowError
			return errors.As(err, &re) && re.EventID == id
		}
		e, getErr := store.Get(ctx, id)
		switch {
		case getErr != nil && !isRowError(getErr):
			t.Errorf("Get of %+v: %v, want a RowError", r, getErr)
		case getErr == nil && (e.ID != id || !json.Valid(e.Payload)):
			t.Errorf("Get of %+v = %+v", r, e)
		}
		b, err := store.Pending(ctx, storage.PendingParams{Now: far, Limit: 10})
		if err != nil {
			t.Errorf("Pending of %+v: %v", r, err)
			return true
		}
		for _, re := range b.Undecodable {
			if !isRowError(re) {
				t.Errorf("Pending of %+v: undecodable %v", r, re)
			}
		}
		for _, e := range b.Events {
			if e.ID != id || !json.Valid(e.Payload) {
				t.Errorf("Pending of %+v = %+v", r, e)
			}
		}
		return getErr != nil || len(b.Undecodable) > 0
	}
}

// adminHandler is the admin API over an in-memory store holding a few DEAD events.
func adminHandler(t *testing.T) http.Handler {
	store := outboxtest.NewMemoryStore()
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range 5 {
		e := outbox.Event{ID: fmt.Sprintf("e%d", i), Type: "T", AggregateType: "A", Payload: json.RawMessage(`{}`),
			CreatedAt: now, AvailableAt: now}
		if _, err := store.Insert(ctx, nil, storage.InsertParams{Events: []outbox.Event{e}}); err != nil {
			t.Fatal(err)
		}
		if _, err := store.MarkDead(ctx, storage.MarkDeadParams{ID: e.ID, DeadAt: now, Reason: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	h, err := outboxadmin.New(deadEventsOver(t, store), outboxadmin.Options{
		Authorize: outboxadmin.BearerToken("tok"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// serve sends one request to h and returns the status and body.
func serve(h http.Handler, method, path, rawQuery, contentType string, body []byte) (int, []byte) {
	r := httptest.NewRequest(method, "/", bytes.NewReader(body))
	r.URL.Path, r.URL.RawQuery = path, rawQuery
	r.Header.Set("Authorization", "Bearer tok")
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	res := w.Result()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// checkAdminAnswer checks an admin API answer: 2xx or 4xx, with a JSON body. It
// reports whether the request was rejected.
func checkAdminAnswer(t *testing.T, what string, code int, body []byte) bool {
	t.Helper()
	if code >= 500 || !json.Valid(body) {
		t.Errorf("%s: %d %s", what, code, body)
	}
	return code >= 400
}

// deadEventsOver returns the dead-event manager of a writer-only outbox over store.
func deadEventsOver(t testing.TB, store storage.Store) *outbox.Events {
	t.Helper()
	ob, err := outbox.New(nil, outbox.Config{Mode: outbox.WriterOnly, Store: store, PurgeInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	return ob.Events()
}
