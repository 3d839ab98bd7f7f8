package outbox_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"modernc.org/sqlite"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// prepareCounter connects to modernc.org/sqlite through connections that count the
// statements they prepare. They have no Execer or Queryer, so database/sql prepares
// every statement it runs without a prepared one: the count is the statements parsed.
type prepareCounter struct {
	dsn string
	n   atomic.Int64
}

func (c *prepareCounter) Connect(context.Context) (driver.Conn, error) {
	cn, err := c.Driver().Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: cn, n: &c.n}, nil
}

func (c *prepareCounter) Driver() driver.Driver { return &sqlite.Driver{} }

type countingConn struct {
	driver.Conn
	n *atomic.Int64
}

func (c *countingConn) Prepare(q string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), q)
}

func (c *countingConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	c.n.Add(1)
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, q)
}

func (c *countingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

// countedSQLite opens a SQLite database through a prepareCounter, one connection as the
// docs advise, migrated, with a store on it.
func countedSQLite(t *testing.T) (*sql.DB, storage.Store, *prepareCounter) {
	t.Helper()
	c := &prepareCounter{dsn: outbox.SQLiteDSN(filepath.Join(t.TempDir(), "app.db"))}
	db := sql.OpenDB(c)
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	if err := outbox.Migrate(t.Context(), db, outbox.SQLite); err != nil {
		t.Fatal(err)
	}
	store, err := outbox.NewSQLStore(db, outbox.SQLite, outbox.SQLStoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return db, store, c
}

func insertOne(ctx context.Context, store storage.Store, tx outbox.Executor, id, key string) error {
	_, err := store.Insert(ctx, tx, storage.InsertParams{Events: []outbox.Event{{
		ID: id, Type: "Thing", AggregateType: "Thing", AggregateID: id, OrderKey: key,
		Payload: json.RawMessage(`{}`), CreatedAt: time.Now(),
	}}})
	return err
}

// preparedWhenWarm writes events (one plain, one ordered on one of three keys) in an
// [outbox.Tx] begun on db and polls, four rounds to warm the store's statements, then 20
// more, and returns how many statements prepared counts during those 20.
func preparedWhenWarm(t *testing.T, db *sql.DB, store storage.Store, prepared func() int64) int64 {
	t.Helper()
	ctx := t.Context()
	round := func(i int) {
		t.Helper()
		err := outbox.RunInTx(ctx, db, func(ctx context.Context, tx *outbox.Tx) error {
			if err := insertOne(ctx, store, tx, fmt.Sprintf("plain-%03d", i), ""); err != nil {
				return err
			}
			return insertOne(ctx, store, tx, fmt.Sprintf("ordered-%03d", i), fmt.Sprintf("k%d", i%3))
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Pending(ctx, storage.PendingParams{Now: time.Now(), Limit: 10}); err != nil {
			t.Fatal(err)
		}
	}
	// The first writes run unprepared and leave their statements to prepare, and the
	// polls prepare them and their own: the first event of each key is inserted NEW
	// on PostgreSQL and SQLite (writes 0 to 2), the others WAITING (3), two texts.
	for i := range 4 {
		round(i)
	}
	before := prepared()
	for i := 4; i < 24; i++ {
		round(i)
	}
	return prepared() - before
}

// On SQLite the store keeps its statements prepared: once a call outside a transaction
// has prepared what a writer's transaction ran, further writes in a [outbox.Tx] begun on
// the store's DB, and the store's own calls, parse nothing.
func TestSQLiteReusesPreparedStatements(t *testing.T) {
	t.Parallel()
	db, store, counter := countedSQLite(t)
	if got := preparedWhenWarm(t, db, store, counter.n.Load); got != 0 {
		t.Fatalf("20 writes and polls prepared %d statements, want none (the statements prepared once)", got)
	}
}

// A transaction begun on another *sql.DB (the same file) cannot use the store's
// prepared statements; its writes run unprepared and succeed.
func TestSQLiteStatementsInAnotherDBsTransaction(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "app.db")
	open := func() *sql.DB {
		db, err := sql.Open("sqlite", outbox.SQLiteDSN(path))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		db.SetMaxOpenConns(1)
		return db
	}
	db, other := open(), open()
	if err := outbox.Migrate(ctx, db, outbox.SQLite); err != nil {
		t.Fatal(err)
	}
	store, err := outbox.NewSQLStore(db, outbox.SQLite, outbox.SQLStoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := store.Pending(ctx, storage.PendingParams{Now: time.Now(), Limit: 10}); err != nil {
			t.Fatal(err)
		}
		err := outbox.RunInTx(ctx, other, func(ctx context.Context, tx *outbox.Tx) error {
			return insertOne(ctx, store, tx, fmt.Sprintf("e%d", i), "")
		})
		if err != nil {
			t.Fatalf("write %d in a transaction of another DB: %v", i, err)
		}
	}
	if e, err := store.Get(ctx, "e2"); err != nil || e.Status != outbox.StatusNew {
		t.Fatalf("Get = %+v, %v", e, err)
	}
}

// Statements of many different texts (ID lists of every length, fenced or not) from
// several goroutines, more than the cache keeps (128 on SQLite): statements are evicted while
// other goroutines run them, and none fails. (The window between taking a statement
// from the cache and starting it is too short to hit on purpose; this is a stress
// test of eviction, run under the race detector.)
func TestSQLiteStatementCacheEviction(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, store, counter := countedSQLite(t)
	const events = 200
	for i := range events {
		err := outbox.RunInTx(ctx, db, func(ctx context.Context, tx *outbox.Tx) error {
			return insertOne(ctx, store, tx, fmt.Sprintf("e%03d", i), "")
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	before := counter.n.Load()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 300 {
				n := 1 + r.IntN(60) // 1..60 IDs: 60 texts per statement kind, all kept while they last
				ids := make([]string, n)
				for j := range ids {
					ids[j] = fmt.Sprintf("e%03d", r.IntN(events))
				}
				var err error
				switch r.IntN(3) {
				case 0:
					_, err = store.MarkDone(ctx, storage.MarkDoneParams{IDs: ids, DoneAt: time.Now()})
				case 1: // fenced: a text of its own, changing nothing
					_, err = store.MarkDone(ctx, storage.MarkDoneParams{IDs: ids, DoneAt: time.Now(), Token: "someone"})
				default: // keys that hold nothing: a text per number of keys
					_, err = store.(storage.OrderStore).Promote(ctx, storage.PromoteParams{Keys: ids, DeadBlocks: r.IntN(2) == 0})
				}
				if err == nil {
					err = outbox.RunInTx(ctx, db, func(ctx context.Context, tx *outbox.Tx) error {
						return insertOne(ctx, store, tx, fmt.Sprintf("g%d-%s-%d", g, ids[0], r.Int()), "")
					})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// 240 texts (4 kinds × 60 lengths) and the writes' INSERT: without evictions at most
	// about 241 preparations.
	if n := counter.n.Load() - before; n < 300 {
		t.Errorf("%d statements prepared: too few for the cache to have evicted many", n)
	}
}
