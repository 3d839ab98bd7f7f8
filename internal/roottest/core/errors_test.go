package outbox_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
	"github.com/outboxkit/outbox/core/storage"
	"github.com/outboxkit/outbox/internal/testdb"
)

// TestEveryExportedErrorIsReturned makes the library return each exported error through
// its public API, and fails when an exported error has no case here: a documented
// error that nothing returns is a broken promise.
func TestEveryExportedErrorIsReturned(t *testing.T) {
	t.Parallel()
	cases := map[string]func(t *testing.T) error{
		"ErrNoTransaction": func(t *testing.T) error {
			db := testdb.NewSQLiteDB(t)
			ob := writerOnly(t, db)
			_, err := ob.Writer().Write(t.Context(), db, outbox.Envelope{Type: "T", Payload: 1})
			return err
		},
		"ErrTxDone": func(t *testing.T) error {
			db := testdb.NewSQLiteDB(t)
			if err := outbox.Migrate(t.Context(), db, outbox.SQLite); err != nil {
				t.Fatal(err)
			}
			ob := writerOnly(t, db)
			tx, err := outbox.BeginTx(t.Context(), db, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			_, err = ob.Writer().Write(t.Context(), tx, outbox.Envelope{Type: "T", Payload: 1})
			return err
		},
		"ErrStopped": stoppedCause,
		"ErrNotFound": func(t *testing.T) error {
			ob := newOutbox(t, outboxtest.NewMemoryStore(), outbox.Config{Mode: outbox.WriterOnly})
			_, err := ob.Events().Get(t.Context(), "missing")
			return err
		},
		"ErrNotDead": func(t *testing.T) error {
			store := outboxtest.NewMemoryStore()
			store.Put(outbox.Event{ID: "e1", Type: "T", AggregateType: outbox.GlobalAggregateType, Payload: json.RawMessage(`1`),
				Status: outbox.StatusNew, CreatedAt: time.Now(), AvailableAt: time.Now()})
			ob := newOutbox(t, store, outbox.Config{Mode: outbox.WriterOnly})
			return ob.Events().Replay(t.Context(), "e1")
		},
		"ErrFinished": func(t *testing.T) error {
			store := outboxtest.NewMemoryStore()
			store.Put(outbox.Event{ID: "e1", Type: "T", AggregateType: outbox.GlobalAggregateType, Payload: json.RawMessage(`1`),
				Status: outbox.StatusDone, CreatedAt: time.Now(), AvailableAt: time.Now()})
			ob := newOutbox(t, store, outbox.Config{Mode: outbox.WriterOnly})
			return ob.Events().Discard(t.Context(), "e1")
		},
		"ErrDuplicateListener": func(t *testing.T) error {
			ob := newOutbox(t, outboxtest.NewMemoryStore(), outbox.Config{})
			l := outbox.ListenerFunc(func(context.Context, *outbox.Event) error { return nil })
			must(t, ob.Register("Order", "Placed", l))
			return ob.Register("Order", "Placed", l)
		},
		"ErrUnrecoverable": func(t *testing.T) error {
			// A Dead result seen through the plain Listener method.
			l := outbox.ListenerFunc(func(context.Context, *outbox.Event) error {
				return outbox.Dead(errors.New("poison"))
			})
			return l.Handle(t.Context(), &outbox.Event{ID: "e1"})
		},
		"ErrUnroutable": func(t *testing.T) error {
			store := outboxtest.NewMemoryStore()
			ob := newOutbox(t, store, outbox.Config{SkipRecent: -1})
			must(t, ob.Start(t.Context()))
			t.Cleanup(func() { _ = ob.Stop(context.Background()) })
			store.Put(outbox.Event{ID: "e1", Type: "Nobody", AggregateType: outbox.GlobalAggregateType, Payload: json.RawMessage(`1`),
				Status: outbox.StatusNew, CreatedAt: time.Now(), AvailableAt: time.Now()})
			if _, err := outboxtest.Poll(t.Context(), ob); err != nil {
				t.Fatal(err)
			}
			e := waitStatus(t, store, "e1", outbox.StatusDead)
			return errors.New(e.LastError) // the recorded reason names it
		},
		"ErrInvalidEnvelope": func(t *testing.T) error {
			return writeEnvelope(t, outbox.Envelope{Payload: 1})
		},
		"ErrInvalidConfig": func(t *testing.T) error {
			_, err := outbox.New(nil, outbox.Config{Store: outboxtest.NewMemoryStore(), Workers: -3})
			return err
		},
		"ErrInvalidArgument": func(t *testing.T) error {
			ob := newOutbox(t, outboxtest.NewMemoryStore(), outbox.Config{Mode: outbox.WriterOnly})
			_, err := ob.Events().ListDead(t.Context(), outbox.DeadQuery{Limit: -1})
			return err
		},
		"ErrEmptyType": func(t *testing.T) error { return writeEnvelope(t, outbox.Envelope{Payload: 1}) },
		"ErrFieldTooLong": func(t *testing.T) error {
			return writeEnvelope(t, outbox.Envelope{Type: strings.Repeat("t", 129), Payload: 1})
		},
		"ErrPayloadRequired": func(t *testing.T) error { return writeEnvelope(t, outbox.Envelope{Type: "T"}) },
		"ErrInvalidPayload":  func(t *testing.T) error { return writeEnvelope(t, outbox.Envelope{Type: "T", Payload: []byte("{")}) },
		"ErrPayloadTooLarge": func(t *testing.T) error {
			return writeEnvelope(t, outbox.Envelope{Type: "T", Payload: strings.Repeat("x", outbox.DefaultMaxPayloadBytes)})
		},
		"ErrEmptyHeaderKey": func(t *testing.T) error {
			return writeEnvelope(t, outbox.Envelope{Type: "T", Payload: 1, Headers: map[string]string{"": "v"}})
		},
		"ErrInvalidText": func(t *testing.T) error { return writeEnvelope(t, outbox.Envelope{Type: "T\x00", Payload: 1}) },
		"ErrInvalidDelay": func(t *testing.T) error {
			return writeEnvelope(t, outbox.Envelope{Type: "T", Payload: 1, DeliverAfter: -time.Second})
		},
		"ErrHeadersTooLarge": func(t *testing.T) error {
			return writeEnvelope(t, outbox.Envelope{Type: "T", Payload: 1, Headers: map[string]string{"k": strings.Repeat("v", outbox.MaxHeadersBytes)}})
		},
		"ErrInvalidTime": func(t *testing.T) error {
			return writeEnvelope(t, outbox.Envelope{Type: "T", Payload: 1, OccurredAt: time.Date(999, 1, 1, 0, 0, 0, 0, time.UTC)})
		},
		"ErrEventTooLarge": func(t *testing.T) error {
			// A writer-only process whose MaxPayloadBytes the server cannot take.
			db := testdb.NewMySQLDB(t)
			table := testdb.IsolatedTable(t, db, outbox.MySQL.Name())
			if err := outbox.MigrateTable(t.Context(), db, outbox.MySQL, table); err != nil {
				t.Fatal(err)
			}
			maxPacket, limit := mysqlPayloadLimit(t, db)
			ob := writerOver(t, db, outbox.Config{Dialect: outbox.MySQL, Table: table, MaxPayloadBytes: 2 * int(maxPacket)})
			tx, err := db.BeginTx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			_, err = ob.Writer().Write(t.Context(), tx, outbox.Envelope{Type: "T",
				Payload: json.RawMessage(`"` + strings.Repeat("x", limit) + `"`)})
			return err
		},
		"ErrUnreadableRow": func(t *testing.T) error {
			// A payload PostgreSQL cannot write out, as an earlier release could store it.
			db := testdb.NewPostgresDB(t)
			table := testdb.IsolatedTable(t, db, outbox.Postgres.Name())
			if err := outbox.MigrateTable(t.Context(), db, outbox.Postgres, table); err != nil {
				t.Fatal(err)
			}
			ob := writerOver(t, db, outbox.Config{Dialect: outbox.Postgres, Table: table})
			err := outbox.RunInTx(t.Context(), db, func(ctx context.Context, tx *outbox.Tx) error {
				id, err := ob.Writer().Write(ctx, tx, outbox.Envelope{Type: "T", Payload: 1})
				if err != nil {
					return err
				}
				_, err = tx.ExecContext(ctx, `UPDATE `+table+` SET payload = CAST($1 AS JSONB) WHERE event_id = $2`, poisonPayload, id)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			batch, err := ob.Store().Pending(t.Context(), storage.PendingParams{Now: time.Now().Add(time.Hour), Limit: 10})
			if err != nil || len(batch.Undecodable) != 1 {
				t.Fatalf("Pending = %+v, %v; want the row reported", batch, err)
			}
			return batch.Undecodable[0]
		},
		"ErrDuplicateID": func(t *testing.T) error {
			ob := newOutbox(t, outboxtest.NewMemoryStore(), outbox.Config{Mode: outbox.WriterOnly})
			_, err := ob.Writer().WriteAll(t.Context(), bareTx{}, []outbox.Envelope{
				{ID: "same", Type: "T", Payload: 1}, {ID: "same", Type: "T", Payload: 2}})
			return err
		},
	}
	exported := exportedErrors(t)
	for _, name := range exported {
		if _, ok := cases[name]; !ok {
			t.Errorf("outbox.%s has no case in this test: make the library return it here", name)
		}
	}
	sentinels := map[string]error{
		"ErrNoTransaction": outbox.ErrNoTransaction, "ErrTxDone": outbox.ErrTxDone, "ErrStopped": outbox.ErrStopped,
		"ErrNotFound": outbox.ErrNotFound, "ErrNotDead": outbox.ErrNotDead, "ErrFinished": outbox.ErrFinished,
		"ErrDuplicateListener": outbox.ErrDuplicateListener,
		"ErrUnrecoverable":     outbox.ErrUnrecoverable, "ErrUnroutable": outbox.ErrUnroutable,
		"ErrInvalidEnvelope": outbox.ErrInvalidEnvelope, "ErrInvalidConfig": outbox.ErrInvalidConfig,
		"ErrInvalidArgument": outbox.ErrInvalidArgument, "ErrEmptyType": outbox.ErrEmptyType,
		"ErrFieldTooLong": outbox.ErrFieldTooLong, "ErrPayloadRequired": outbox.ErrPayloadRequired,
		"ErrInvalidPayload": outbox.ErrInvalidPayload, "ErrPayloadTooLarge": outbox.ErrPayloadTooLarge,
		"ErrEmptyHeaderKey": outbox.ErrEmptyHeaderKey, "ErrInvalidText": outbox.ErrInvalidText,
		"ErrInvalidDelay": outbox.ErrInvalidDelay, "ErrDuplicateID": outbox.ErrDuplicateID,
		"ErrHeadersTooLarge": outbox.ErrHeadersTooLarge, "ErrInvalidTime": outbox.ErrInvalidTime,
		"ErrEventTooLarge": outbox.ErrEventTooLarge, "ErrUnreadableRow": outbox.ErrUnreadableRow,
	}
	for name, run := range cases {
		t.Run(name, func(t *testing.T) {
			want, ok := sentinels[name]
			if !ok {
				t.Fatalf("no sentinel for %s", name)
			}
			err := run(t)
			if name == "ErrUnroutable" {
				// Recorded as the dead event's reason, not returned to a caller.
				if err == nil || !strings.Contains(err.Error(), want.Error()) {
					t.Fatalf("dead event's last error %v does not name %v", err, want)
				}
				return
			}
			if !errors.Is(err, want) {
				t.Fatalf("err = %v, want one matching outbox.%s", err, name)
			}
		})
	}
}

// stoppedCause starts an outbox whose listener blocks until its context ends, stops it
// with a deadline that passes, and returns the cause of the listener's context.
func stoppedCause(t *testing.T) error {
	store := outboxtest.NewMemoryStore()
	ob := newOutbox(t, store, outbox.Config{SkipRecent: -1})
	cause := make(chan error, 1)
	started := make(chan struct{})
	must(t, ob.Register("", "Block", outbox.ListenerFunc(func(ctx context.Context, _ *outbox.Event) error {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	})))
	must(t, ob.Start(t.Context()))
	store.Put(outbox.Event{ID: "e1", Type: "Block", AggregateType: outbox.GlobalAggregateType, Payload: json.RawMessage(`1`),
		Status: outbox.StatusNew, CreatedAt: time.Now(), AvailableAt: time.Now()})
	if _, err := outboxtest.Poll(t.Context(), ob); err != nil {
		t.Fatal(err)
	}
	<-started
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if err := ob.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop = %v, want the deadline's error", err)
	}
	return <-cause
}

// exportedErrors lists the exported Err* variables of package outbox, from its source.
func exportedErrors(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(coreDir(t), "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				for _, n := range spec.(*ast.ValueSpec).Names {
					if strings.HasPrefix(n.Name, "Err") && n.IsExported() {
						names = append(names, n.Name)
					}
				}
			}
		}
	}
	sort.Strings(names)
	if len(names) < 10 {
		t.Fatalf("found only %d exported errors (%v) in %s", len(names), names, coreDir(t))
	}
	return names
}

// bareTx is an executor inside a transaction without after-commit callbacks; the
// memory store ignores it.
type bareTx struct{}

func (bareTx) ExecContext(context.Context, string, ...any) (sql.Result, error) {
	return nil, errors.New("bareTx runs no SQL")
}
func (bareTx) QueryContext(context.Context, string, ...any) (*sql.Rows, error) {
	return nil, errors.New("bareTx runs no SQL")
}
func (bareTx) Commit() error   { return nil }
func (bareTx) Rollback() error { return nil }

// writerOnly returns a writer-only outbox over db on SQLite.
func writerOnly(t *testing.T, db *sql.DB) *outbox.Outbox {
	t.Helper()
	ob, err := outbox.New(db, outbox.Config{Mode: outbox.WriterOnly, Dialect: outbox.SQLite, PurgeInterval: -1, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return ob
}

func newOutbox(t *testing.T, store storage.Store, cfg outbox.Config) *outbox.Outbox {
	t.Helper()
	cfg.Store = store
	if cfg.Mode == outbox.WriterOnly {
		cfg.PurgeInterval = -1
	}
	cfg.Logger = discardLogger()
	ob, err := outbox.New(nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ob
}

// writerOver returns a writer-only Outbox over the SQL store of db.
func writerOver(t *testing.T, db *sql.DB, cfg outbox.Config) *outbox.Outbox {
	t.Helper()
	cfg.Mode, cfg.PurgeInterval, cfg.Logger = outbox.WriterOnly, -1, discardLogger()
	ob, err := outbox.New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ob
}

func writeEnvelope(t *testing.T, env outbox.Envelope) error {
	ob := newOutbox(t, outboxtest.NewMemoryStore(), outbox.Config{Mode: outbox.WriterOnly})
	_, err := ob.Writer().Write(t.Context(), bareTx{}, env)
	return err
}

func waitStatus(t *testing.T, store *outboxtest.MemoryStore, id string, want outbox.Status) outbox.Event {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if e, ok := store.Event(id); ok && e.Status == want {
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("event %s never reached %s", id, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// coreOnlyStore has the Store methods of a memory store and none of the optional ones.
type coreOnlyStore struct{ s *outboxtest.MemoryStore }

func (c coreOnlyStore) Insert(ctx context.Context, exec outbox.Executor, p storage.InsertParams) (storage.InsertResult, error) {
	return c.s.Insert(ctx, exec, p)
}
func (c coreOnlyStore) Get(ctx context.Context, id string) (outbox.Event, error) {
	return c.s.Get(ctx, id)
}
func (c coreOnlyStore) Pending(ctx context.Context, p storage.PendingParams) (storage.PendingBatch, error) {
	return c.s.Pending(ctx, p)
}
func (c coreOnlyStore) MarkDone(ctx context.Context, p storage.MarkDoneParams) (int64, error) {
	return c.s.MarkDone(ctx, p)
}
func (c coreOnlyStore) Reschedule(ctx context.Context, p storage.RescheduleParams) (int64, error) {
	return c.s.Reschedule(ctx, p)
}
func (c coreOnlyStore) MarkDead(ctx context.Context, p storage.MarkDeadParams) (int64, error) {
	return c.s.MarkDead(ctx, p)
}
func (c coreOnlyStore) Purge(ctx context.Context, p storage.PurgeParams) (int64, error) {
	return c.s.Purge(ctx, p)
}

// TestStoreWithoutOptionalInterfaces: a store with only the delivery core delivers
// events; the features of the optional interfaces say plainly that it lacks them.
func TestStoreWithoutOptionalInterfaces(t *testing.T) {
	t.Parallel()
	mem := outboxtest.NewMemoryStore()
	store := coreOnlyStore{mem}
	if _, err := outbox.New(nil, outbox.Config{Mode: outbox.MultiNode, Store: store, ClaimTTL: time.Minute}); !errors.Is(err, outbox.ErrInvalidConfig) ||
		!strings.Contains(err.Error(), "ClaimStore") {
		t.Fatalf("MultiNode over a store without claims: err = %v, want a ConfigError naming ClaimStore", err)
	}
	ob := newOutbox(t, store, outbox.Config{SkipRecent: -1})
	got := make(chan string, 1)
	must(t, ob.Register("", "T", outbox.ListenerFunc(func(_ context.Context, e *outbox.Event) error { got <- e.ID; return nil })))
	must(t, ob.Start(t.Context()))
	t.Cleanup(func() { _ = ob.Stop(context.Background()) })
	ids, err := ob.Writer().WriteAll(t.Context(), bareTx{}, []outbox.Envelope{{Type: "T", Payload: 1}})
	must(t, err)
	if _, err := outboxtest.Poll(t.Context(), ob); err != nil {
		t.Fatal(err)
	}
	if id := <-got; id != ids[0] {
		t.Fatalf("delivered %s, want %s", id, ids[0])
	}
	if _, err := ob.Events().CountDead(t.Context(), outbox.DeadFilter{}); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Dead().Count = %v, want errors.ErrUnsupported", err)
	}
	if _, err := ob.Events().Stats(t.Context()); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Dead().Stats = %v, want errors.ErrUnsupported", err)
	}
}

// coreDir is the directory of package outbox: core/ under the repository root (the
// directory holding go.work).
func coreDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return filepath.Join(dir, "core")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.work above the working directory")
		}
		dir = parent
	}
}
