package outbox_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/adapterkit"
	"github.com/outboxkit/outbox/core/storage"
	"github.com/outboxkit/outbox/internal/fuzztally"
)

// insertRecorder is a Store whose Insert records batches; writer tests need nothing else.
type insertRecorder struct {
	storage.Store // nil: any other method panics, proving the writer never calls it
	mu            sync.Mutex
	batches       [][]outbox.Event
	execs         []outbox.Executor
	err           error
}

func (r *insertRecorder) Insert(_ context.Context, exec outbox.Executor, p storage.InsertParams) (storage.InsertResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return storage.InsertResult{}, r.err
	}
	r.batches = append(r.batches, p.Events)
	r.execs = append(r.execs, exec)
	return storage.InsertResult{}, nil
}

func (r *insertRecorder) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.batches)
}

// fakeTx looks like a transaction (Commit/Rollback) and fails any SQL.
type fakeTx struct{}

func (fakeTx) ExecContext(context.Context, string, ...any) (sql.Result, error) {
	return nil, errors.New("fakeTx runs no SQL")
}

func (fakeTx) QueryContext(context.Context, string, ...any) (*sql.Rows, error) {
	return nil, errors.New("fakeTx runs no SQL")
}
func (fakeTx) Commit() error   { return nil }
func (fakeTx) Rollback() error { return nil }

// hookedTx is a transaction with callbacks, as adapters build it.
type hookedTx struct {
	fakeTx
	adapterkit.Callbacks
}

func newWriter(t *testing.T, store storage.Store, cfg outbox.WriterConfig) *outbox.Writer {
	t.Helper()
	w, err := outbox.NewWriter(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestWriterRejectsExecutorsOutsideATransaction(t *testing.T) {
	t.Parallel()
	rec := &insertRecorder{}
	w := newWriter(t, rec, outbox.WriterConfig{})
	env := outbox.Envelope{Type: "OrderPlaced", Payload: map[string]int{"id": 1}}
	for name, exec := range map[string]outbox.Executor{
		"nil":       nil,
		"*sql.DB":   (*sql.DB)(nil),
		"*sql.Conn": (*sql.Conn)(nil),
	} {
		if _, err := w.Write(context.Background(), exec, env); !errors.Is(err, outbox.ErrNoTransaction) {
			t.Errorf("%s: err = %v, want ErrNoTransaction", name, err)
		}
	}
	if rec.calls() != 0 {
		t.Fatalf("store.Insert called %d times", rec.calls())
	}
}

func TestWriterValidatesBeforeAnySQL(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 200)
	big := json.RawMessage(`"` + strings.Repeat("a", 100) + `"`)
	cases := []struct {
		name  string
		env   outbox.Envelope
		field string
		want  error
	}{
		{"empty type", outbox.Envelope{Payload: "{}"}, "Type", outbox.ErrEmptyType},
		{"long type", outbox.Envelope{Type: long, Payload: 1}, "Type", outbox.ErrFieldTooLong},
		{"long aggregate type", outbox.Envelope{Type: "T", AggregateType: long, Payload: 1}, "AggregateType", outbox.ErrFieldTooLong},
		{"long aggregate id", outbox.Envelope{Type: "T", AggregateID: long, Payload: 1}, "AggregateID", outbox.ErrFieldTooLong},
		{"long tenant", outbox.Envelope{Type: "T", TenantID: long, Payload: 1}, "TenantID", outbox.ErrFieldTooLong},
		{"long id", outbox.Envelope{ID: long, Type: "T", Payload: 1}, "ID", outbox.ErrFieldTooLong},
		{"bad utf8 type", outbox.Envelope{Type: "\xff", Payload: 1}, "Type", outbox.ErrInvalidText},
		{"nil payload", outbox.Envelope{Type: "T"}, "Payload", outbox.ErrPayloadRequired},
		{"nil raw payload", outbox.Envelope{Type: "T", Payload: json.RawMessage(nil)}, "Payload", outbox.ErrPayloadRequired},
		{"invalid raw json", outbox.Envelope{Type: "T", Payload: []byte(`{"a":`)}, "Payload", outbox.ErrInvalidPayload},
		{"unmarshalable", outbox.Envelope{Type: "T", Payload: make(chan int)}, "Payload", outbox.ErrInvalidPayload},
		{"escaped NUL", outbox.Envelope{Type: "T", Payload: map[string]string{"a": "x\x00"}}, "Payload", outbox.ErrInvalidPayload},
		{"too large raw", outbox.Envelope{Type: "T", Payload: big}, "Payload", outbox.ErrPayloadTooLarge},
		{"too large marshalled", outbox.Envelope{Type: "T", Payload: strings.Repeat("a", 100)}, "Payload", outbox.ErrPayloadTooLarge},
		{"empty header key", outbox.Envelope{Type: "T", Payload: 1, Headers: map[string]string{"": "v"}}, "Headers", outbox.ErrEmptyHeaderKey},
		{"nul in aggregate id", outbox.Envelope{Type: "T", AggregateID: "a\x00b", Payload: 1}, "AggregateID", outbox.ErrInvalidText},
		{"bad utf8 header", outbox.Envelope{Type: "T", Payload: 1, Headers: map[string]string{"k": "\xfe"}}, "Headers", outbox.ErrInvalidText},
		{"both delays", outbox.Envelope{Type: "T", Payload: 1, AvailableAt: time.Now().Add(time.Hour), DeliverAfter: time.Minute}, "AvailableAt", outbox.ErrInvalidDelay},
		{"negative delay", outbox.Envelope{Type: "T", Payload: 1, DeliverAfter: -time.Second}, "DeliverAfter", outbox.ErrInvalidDelay},
		{"available before occurred", outbox.Envelope{Type: "T", Payload: 1, OccurredAt: time.Now(), AvailableAt: time.Now().Add(-time.Hour)}, "AvailableAt", outbox.ErrInvalidDelay},
		// 13 bytes that PostgreSQL returns as 131,074: every read of the row would fail.
		{"exponent expands", outbox.Envelope{Type: "T", Payload: json.RawMessage(`[1e131071]`)}, "Payload", outbox.ErrPayloadTooLarge},
		{"negative exponent expands", outbox.Envelope{Type: "T", Payload: json.RawMessage(`[1e-100]`)}, "Payload", outbox.ErrPayloadTooLarge},
		{"exponents add up", outbox.Envelope{Type: "T", Payload: json.RawMessage(`[1e9,1e9,1e9,1e9,1e9,1e9]`)}, "Payload", outbox.ErrPayloadTooLarge},
		{"headers too large", outbox.Envelope{Type: "T", Payload: 1, Headers: map[string]string{"k": strings.Repeat("v", outbox.MaxHeadersBytes)}}, "Headers", outbox.ErrHeadersTooLarge},
		{"headers too large together", outbox.Envelope{Type: "T", Payload: 1, Headers: map[string]string{
			"a": strings.Repeat("v", outbox.MaxHeadersBytes/2), "b": strings.Repeat("v", outbox.MaxHeadersBytes/2)}}, "Headers", outbox.ErrHeadersTooLarge},
		{"occurred before year 1000", outbox.Envelope{Type: "T", Payload: 1, OccurredAt: time.Date(999, 12, 31, 0, 0, 0, 0, time.UTC)}, "OccurredAt", outbox.ErrInvalidTime},
		{"available after year 9999", outbox.Envelope{Type: "T", Payload: 1, AvailableAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, "AvailableAt", outbox.ErrInvalidTime},
		{"delay past year 9999", outbox.Envelope{Type: "T", Payload: 1, OccurredAt: time.Date(9999, 12, 31, 23, 0, 0, 0, time.UTC), DeliverAfter: 2 * time.Hour}, "DeliverAfter", outbox.ErrInvalidTime},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := &insertRecorder{}
			w := newWriter(t, rec, outbox.WriterConfig{MaxPayloadBytes: 64})
			_, err := w.Write(context.Background(), fakeTx{}, tc.env)
			var envErr *outbox.EnvelopeError
			if !errors.As(err, &envErr) {
				t.Fatalf("err = %v, want *EnvelopeError", err)
			}
			if !errors.Is(err, tc.want) || !errors.Is(err, outbox.ErrInvalidEnvelope) {
				t.Fatalf("err = %v, want %v and ErrInvalidEnvelope", err, tc.want)
			}
			if envErr.Field != tc.field {
				t.Fatalf("field = %q, want %q", envErr.Field, tc.field)
			}
			if rec.calls() != 0 {
				t.Fatal("store.Insert was called for an invalid envelope")
			}
		})
	}
}

func TestWriteAllReportsIndexAndDuplicateIDs(t *testing.T) {
	t.Parallel()
	rec := &insertRecorder{}
	w := newWriter(t, rec, outbox.WriterConfig{})
	_, err := w.WriteAll(context.Background(), fakeTx{}, []outbox.Envelope{
		{Type: "A", Payload: 1}, {Type: "", Payload: 1},
	})
	var envErr *outbox.EnvelopeError
	if !errors.As(err, &envErr) || envErr.Index != 1 {
		t.Fatalf("err = %v, want envelope 1", err)
	}
	_, err = w.WriteAll(context.Background(), fakeTx{}, []outbox.Envelope{
		{ID: "same", Type: "A", Payload: 1}, {ID: "same", Type: "B", Payload: 1},
	})
	if !errors.Is(err, outbox.ErrDuplicateID) {
		t.Fatalf("err = %v, want ErrDuplicateID", err)
	}
	if rec.calls() != 0 {
		t.Fatal("store.Insert was called for an invalid batch")
	}
}

func TestWriterDefaultsAndEncoding(t *testing.T) {
	t.Parallel()
	rec := &insertRecorder{}
	fixed := time.Date(2026, 3, 4, 5, 6, 7, 891234567, time.FixedZone("X", 3600))
	w := newWriter(t, rec, outbox.WriterConfig{Now: func() time.Time { return fixed }})
	raw := []byte(`{"n":1}`)
	ids, err := w.WriteAll(context.Background(), fakeTx{}, []outbox.Envelope{
		{Type: "A", Payload: raw, Headers: map[string]string{"trace": "t1"}},
		{Type: "B", Payload: struct{ N int }{2}, AggregateType: "Order", AggregateID: "o-1", TenantID: "t", DeliverAfter: time.Minute},
		{ID: "mine", Type: "C", Payload: json.RawMessage(`[1,2]`), AvailableAt: fixed.Add(time.Hour)},
	})
	if err != nil {
		t.Fatal(err)
	}
	raw[2] = 'X' // the writer must have copied the caller's buffer
	if len(ids) != 3 || ids[2] != "mine" || len(ids[0]) != 26 || ids[0] >= ids[1] {
		t.Fatalf("ids = %v", ids)
	}
	if rec.calls() != 1 || len(rec.batches[0]) != 3 {
		t.Fatalf("want one INSERT of 3 events, got %v", rec.batches)
	}
	evs := rec.batches[0]
	wantTime := fixed.UTC().Truncate(time.Microsecond)
	a, b, c := evs[0], evs[1], evs[2]
	if string(a.Payload) != `{"n":1}` || a.AggregateType != outbox.GlobalAggregateType || a.Headers["trace"] != "t1" {
		t.Fatalf("a = %+v", a)
	}
	if !a.CreatedAt.Equal(wantTime) || a.CreatedAt.Location() != time.UTC || !a.AvailableAt.Equal(wantTime) || a.Status != outbox.StatusNew {
		t.Fatalf("a times = %v %v", a.CreatedAt, a.AvailableAt)
	}
	if string(b.Payload) != `{"N":2}` || b.AggregateType != "Order" || b.AggregateID != "o-1" || b.TenantID != "t" {
		t.Fatalf("b = %+v", b)
	}
	if !b.AvailableAt.Equal(wantTime.Add(time.Minute)) {
		t.Fatalf("b available = %v", b.AvailableAt)
	}
	if !c.AvailableAt.Equal(wantTime.Add(time.Hour)) || b.Headers != nil {
		t.Fatalf("c available = %v, b headers %v", c.AvailableAt, b.Headers)
	}
}

// stageHook records calls and can transform, suppress, fail or panic.
type stageHook struct {
	outbox.NopWriterHook
	mu       sync.Mutex
	calls    []string
	before   func([]outbox.Envelope) ([]outbox.Envelope, error)
	failWith error
	panicIn  string
}

func (h *stageHook) record(s string) {
	h.mu.Lock()
	h.calls = append(h.calls, s)
	h.mu.Unlock()
	if h.panicIn == s {
		panic("hook panic in " + s)
	}
}

func (h *stageHook) log() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.calls, ",")
}

func (h *stageHook) BeforeWrite(_ context.Context, envs []outbox.Envelope) ([]outbox.Envelope, error) {
	h.record("before")
	if h.before != nil {
		return h.before(envs)
	}
	return envs, nil
}

func (h *stageHook) AfterWrite(context.Context, []outbox.Event) error {
	h.record("afterWrite")
	return h.failWith
}

func (h *stageHook) AfterCommit(context.Context, []outbox.Event) error {
	h.record("afterCommit")
	return h.failWith
}

func (h *stageHook) AfterRollback(context.Context, []outbox.Event) error {
	h.record("afterRollback")
	return h.failWith
}

func TestWriterHooksLifecycle(t *testing.T) {
	t.Parallel()
	env := outbox.Envelope{Type: "T", Payload: 1}
	t.Run("commit", func(t *testing.T) {
		t.Parallel()
		h := &stageHook{}
		w := newWriter(t, &insertRecorder{}, outbox.WriterConfig{Hooks: []outbox.WriterHook{h}})
		tx := &hookedTx{}
		if _, err := w.Write(context.Background(), tx, env); err != nil {
			t.Fatal(err)
		}
		if got := h.log(); got != "before,afterWrite" {
			t.Fatalf("before commit: %s", got)
		}
		tx.Committed()
		if got := h.log(); got != "before,afterWrite,afterCommit" {
			t.Fatalf("after commit: %s", got)
		}
	})
	t.Run("rollback", func(t *testing.T) {
		t.Parallel()
		h := &stageHook{}
		w := newWriter(t, &insertRecorder{}, outbox.WriterConfig{Hooks: []outbox.WriterHook{h}})
		tx := &hookedTx{}
		if _, err := w.Write(context.Background(), tx, env); err != nil {
			t.Fatal(err)
		}
		tx.RolledBack()
		if got := h.log(); got != "before,afterWrite,afterRollback" {
			t.Fatalf("got %s", got)
		}
	})
	t.Run("errors and panics after the insert are swallowed", func(t *testing.T) {
		t.Parallel()
		for _, stage := range []string{"afterWrite", "afterCommit"} {
			h := &stageHook{failWith: errors.New("hook failed"), panicIn: stage}
			second := &stageHook{}
			w := newWriter(t, &insertRecorder{}, outbox.WriterConfig{Hooks: []outbox.WriterHook{h, second}, Logger: discardLogger()})
			tx := &hookedTx{}
			if _, err := w.Write(context.Background(), tx, env); err != nil {
				t.Fatalf("%s: write error %v", stage, err)
			}
			tx.Committed() // must not panic
			if got := second.log(); got != "before,afterWrite,afterCommit" {
				t.Fatalf("%s: second hook saw %s", stage, got)
			}
		}
	})
	t.Run("before write transforms", func(t *testing.T) {
		t.Parallel()
		rec := &insertRecorder{}
		h := &stageHook{before: func(envs []outbox.Envelope) ([]outbox.Envelope, error) {
			envs = append(envs, outbox.Envelope{Type: "Extra", Payload: 2})
			for i := range envs {
				envs[i].TenantID = "tenant-a"
			}
			return envs, nil
		}}
		w := newWriter(t, rec, outbox.WriterConfig{Hooks: []outbox.WriterHook{h}})
		ids, err := w.Write(context.Background(), fakeTx{}, env)
		if err != nil || ids == "" {
			t.Fatal(ids, err)
		}
		if len(rec.batches[0]) != 2 || rec.batches[0][1].Type != "Extra" || rec.batches[0][0].TenantID != "tenant-a" {
			t.Fatalf("batch = %+v", rec.batches[0])
		}
	})
	t.Run("before write suppresses", func(t *testing.T) {
		t.Parallel()
		rec := &insertRecorder{}
		h := &stageHook{before: func([]outbox.Envelope) ([]outbox.Envelope, error) { return nil, nil }}
		w := newWriter(t, rec, outbox.WriterConfig{Hooks: []outbox.WriterHook{h}})
		id, err := w.Write(context.Background(), fakeTx{}, env)
		if err != nil || id != "" || rec.calls() != 0 {
			t.Fatalf("id=%q err=%v calls=%d", id, err, rec.calls())
		}
	})
	t.Run("before write error and panic abort", func(t *testing.T) {
		t.Parallel()
		rec := &insertRecorder{}
		boom := errors.New("boom")
		w := newWriter(t, rec, outbox.WriterConfig{Hooks: []outbox.WriterHook{&stageHook{before: func([]outbox.Envelope) ([]outbox.Envelope, error) { return nil, boom }}}})
		if _, err := w.Write(context.Background(), fakeTx{}, env); !errors.Is(err, boom) {
			t.Fatalf("err = %v", err)
		}
		w = newWriter(t, rec, outbox.WriterConfig{Hooks: []outbox.WriterHook{&stageHook{panicIn: "before"}}})
		var pe *outbox.PanicError
		if _, err := w.Write(context.Background(), fakeTx{}, env); !errors.As(err, &pe) {
			t.Fatalf("err = %v, want *PanicError", err)
		}
		if rec.calls() != 0 {
			t.Fatal("inserted despite BeforeWrite failure")
		}
	})
	t.Run("store error is returned and no callbacks registered", func(t *testing.T) {
		t.Parallel()
		h := &stageHook{}
		boom := errors.New("insert failed")
		w := newWriter(t, &insertRecorder{err: boom}, outbox.WriterConfig{Hooks: []outbox.WriterHook{h}})
		tx := &hookedTx{}
		if _, err := w.Write(context.Background(), tx, env); !errors.Is(err, boom) {
			t.Fatalf("err = %v", err)
		}
		tx.Committed()
		if got := h.log(); got != "before" {
			t.Fatalf("got %s", got)
		}
	})
}

func TestNewWriterValidates(t *testing.T) {
	t.Parallel()
	if _, err := outbox.NewWriter(nil, outbox.WriterConfig{}); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Fatalf("nil store: %v", err)
	}
	if _, err := outbox.NewWriter(&insertRecorder{}, outbox.WriterConfig{MaxPayloadBytes: -1}); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Fatalf("negative max: %v", err)
	}
	if _, err := outbox.NewWriter(&insertRecorder{}, outbox.WriterConfig{Hooks: []outbox.WriterHook{nil}}); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Fatalf("nil hook: %v", err)
	}
}

func FuzzWriterEnvelope(f *testing.F) {
	f.Add("OrderPlaced", "Order", "o-1", []byte(`{"id":1}`), "trace", "abc", int64(0))
	f.Add("", "", "", []byte(`{`), "", "", int64(-1))
	f.Add("T", "\xff", "x", []byte(`null`), "k", "\xfe", int64(1e9))
	f.Add("T", "", "", []byte(`["\\u0000", "\u0000"]`), "k", "v", int64(0))
	f.Add("T", "", "", []byte(`"\ud800"`), "k", "v", int64(0))
	f.Add("T", "", "", []byte(`["\udc00", "\ud83d\ude00", "\ud800\u0041"]`), "k", "v", int64(0))
	f.Add("T", "", "", []byte("\"\xed\xa0\x80\""), "\xed\xa0\x80", "v", int64(0))
	f.Add("T", "", "", []byte(`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`), "k", "v", int64(0))
	f.Add("T", "", "", []byte(`[1e131072, 1e-16384, 1e131071, 1.5e-16382]`), "k", "v", int64(0))
	f.Fuzz(func(t *testing.T, typ, aggType, aggID string, payload []byte, hk, hv string, delay int64) {
		rec := &insertRecorder{}
		w, err := outbox.NewWriter(rec, outbox.WriterConfig{MaxPayloadBytes: 1024})
		if err != nil {
			t.Fatal(err)
		}
		env := outbox.Envelope{Type: typ, AggregateType: aggType, AggregateID: aggID, Payload: payload,
			Headers: map[string]string{hk: hv}, DeliverAfter: time.Duration(delay)}
		id, err := w.Write(context.Background(), fakeTx{}, env)
		fuzztally.Record(err != nil)
		if err != nil {
			if !errors.Is(err, outbox.ErrInvalidEnvelope) {
				t.Fatalf("untyped error %v", err)
			}
			if rec.calls() != 0 {
				t.Fatal("inserted an invalid envelope")
			}
			return
		}
		ev := rec.batches[0][0]
		if id == "" || ev.ID != id || !json.Valid(ev.Payload) || !utf8.Valid(ev.Payload) || ev.Type != typ ||
			ev.AvailableAt.Before(ev.CreatedAt) {
			t.Fatalf("accepted envelope stored as %+v", ev)
		}
	})
}

// TestWriterRejectsPayloadsDatabasesReject checks that JSON text that json.Valid accepts
// but a supported database rejects (PostgreSQL's jsonb: invalid UTF-8, \u0000, unpaired
// surrogate escapes, numbers outside numeric's range; MariaDB's JSON_VALID: surrogates,
// nesting of 32 levels) fails with ErrInvalidPayload before any SQL, raw or marshalled,
// and that its neighbours that every database stores pass.
func TestWriterRejectsPayloadsDatabasesReject(t *testing.T) {
	t.Parallel()
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	bad := map[string]string{
		"lone high surrogate":          `"\ud800"`,
		"lone low surrogate":           `"\udc00"`,
		"high surrogate, then text":    `"\ud800x"`,
		"high surrogate at the end":    `["a\uDBFF"]`,
		"high surrogate, then non-low": `"\ud800\u0041"`,
		"two high surrogates":          `"\ud800\ud800"`,
		"swapped pair":                 `"\ude00\ud83d"`,
		"surrogate in a key":           `{"\ud800":1}`,
		"invalid UTF-8":                "\"\xff\"",
		"truncated UTF-8":              "[\"\xc3\"]",
		"UTF-8 encoded surrogate":      "\"\xed\xa0\x80\"",
		"overlong UTF-8":               "\"\xc0\xaf\"",
		"escaped NUL":                  `{"k":"a\u0000"}`,
		"32 levels":                    nest(32),
		"32 levels of objects":         strings.Repeat(`{"a":`, 31) + "{}" + strings.Repeat("}", 31),
		"number overflows numeric":     `1e131072`,
		"number underflows numeric":    `[1e-16384]`,
		"too many fraction digits":     "0." + strings.Repeat("0", 16384),
		"huge exponent":                `-2E+99999999999999999999`,
	}
	good := map[string]string{
		"surrogate pair":            `"\ud83d\ude00"`,
		"upper-case pair":           `"\uD83D\uDE00"`,
		"escaped backslash, then u": `"\\ud800"`,
		"UTF-8":                     `"é😀\u00e9"`,
		"31 levels":                 nest(31),
		"largest numbers":           `[1e131071, -9.9E+131071, 1.5e-16382, 0e-16383]`,
		"brackets in strings":       `"` + nest(40) + `"`,
		"fraction digits":           "0." + strings.Repeat("1", 16383),
	}
	type wrapped struct {
		Data json.RawMessage `json:"data"`
	}
	w := newWriter(t, &insertRecorder{}, outbox.WriterConfig{})
	for name, p := range bad {
		for kind, payload := range map[string]any{"raw": []byte(p), "marshalled": wrapped{json.RawMessage(p)}} {
			_, err := w.Write(context.Background(), fakeTx{}, outbox.Envelope{Type: "T", Payload: payload})
			var ee *outbox.EnvelopeError
			if !errors.As(err, &ee) || ee.Field != "Payload" || !errors.Is(err, outbox.ErrInvalidPayload) {
				// json.Marshal rejects some of them itself, also as ErrInvalidPayload.
				t.Errorf("%s (%s): err = %v, want an ErrInvalidPayload EnvelopeError", name, kind, err)
			}
		}
	}
	for name, p := range good {
		if _, err := w.Write(context.Background(), fakeTx{}, outbox.Envelope{Type: "T", Payload: json.RawMessage(p)}); err != nil {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	// Headers are jsonb on PostgreSQL too: text that is not valid UTF-8 (which includes
	// an encoded surrogate) is rejected there.
	for _, h := range []map[string]string{{"k": "\xed\xa0\x80"}, {"\xed\xb0\x80": "v"}, {"k": "\x00"}} {
		if _, err := w.Write(context.Background(), fakeTx{}, outbox.Envelope{Type: "T", Payload: 1, Headers: h}); !errors.Is(err, outbox.ErrInvalidText) {
			t.Errorf("headers %q: err = %v, want ErrInvalidText", h, err)
		}
	}
}

func TestWriterAcceptsEscapedBackslashBeforeU0000(t *testing.T) {
	t.Parallel()
	w := newWriter(t, &insertRecorder{}, outbox.WriterConfig{})
	// `"\\u0000"` is a backslash followed by the text u0000, not a NUL character.
	if _, err := w.Write(context.Background(), fakeTx{}, outbox.Envelope{Type: "T", Payload: []byte(`"\\u0000"`)}); err != nil {
		t.Fatalf("err = %v", err)
	}
	if _, err := w.Write(context.Background(), fakeTx{}, outbox.Envelope{Type: "T", Payload: []byte(`"\\\u0000"`)}); !errors.Is(err, outbox.ErrInvalidPayload) {
		t.Fatalf("escaped backslash then \\u0000: err = %v", err)
	}
}
