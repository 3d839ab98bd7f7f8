package outbox_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
	"github.com/outboxkit/outbox/internal/testdb"
)

// mysqlPrepareCounter connects through go-sql-driver/mysql and counts the statements
// its connections prepare on the server. Its connections pass statements on to the
// driver's own Exec and Query, which refuse any statement with arguments
// (driver.ErrSkip, without interpolateParams): database/sql then prepares it, runs it
// and closes it. So every statement the server prepares goes through PrepareContext,
// whether the store handed database/sql a prepared statement or not.
type mysqlPrepareCounter struct {
	driver.Connector
	n       atomic.Int64
	inserts atomic.Int64 // the preparations of INSERT statements
}

func (c *mysqlPrepareCounter) Connect(ctx context.Context) (driver.Conn, error) {
	cn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &mysqlCountingConn{Conn: cn, n: &c.n, inserts: &c.inserts}, nil
}

// mysqlCountingConn forwards what database/sql asks of a go-sql-driver/mysql
// connection, counting preparations.
type mysqlCountingConn struct {
	driver.Conn
	n, inserts *atomic.Int64
}

func (c *mysqlCountingConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	c.n.Add(1)
	if strings.HasPrefix(q, "INSERT") {
		c.inserts.Add(1)
	}
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, q)
}

func (c *mysqlCountingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c *mysqlCountingConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
}

func (c *mysqlCountingConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}

func (c *mysqlCountingConn) CheckNamedValue(v *driver.NamedValue) error {
	return c.Conn.(driver.NamedValueChecker).CheckNamedValue(v)
}

func (c *mysqlCountingConn) ResetSession(ctx context.Context) error {
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (c *mysqlCountingConn) IsValid() bool { return c.Conn.(driver.Validator).IsValid() }

func (c *mysqlCountingConn) Ping(ctx context.Context) error {
	return c.Conn.(driver.Pinger).Ping(ctx)
}

// On MySQL/MariaDB the store keeps its statements prepared on the server: once warm,
// writes in an [outbox.Tx] begun on the store's DB and the store's own polls prepare
// nothing, where the driver alone prepares and closes a statement per call. One
// connection, so that every statement is prepared on the connection that runs it (with
// more, database/sql prepares a kept statement once on each connection it runs on).
func TestMySQLReusesPreparedStatements(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, store, counter := countedMySQL(t)

	// The counter sees the driver's own preparations: a statement with an argument that
	// the store did not prepare is prepared once per call.
	before := counter.n.Load()
	for range 3 {
		var one int
		if err := db.QueryRowContext(ctx, "SELECT ?", 1).Scan(&one); err != nil {
			t.Fatal(err)
		}
	}
	if got := counter.n.Load() - before; got != 3 {
		t.Fatalf("3 unprepared queries with an argument prepared %d statements, want 3", got)
	}

	if got := preparedWhenWarm(t, db, store, counter.n.Load); got != 0 {
		t.Fatalf("20 writes and polls prepared %d statements on the server, want none (the statements prepared once)", got)
	}
}

// In MultiNode mode the store's calls outside the writers' transactions are its own
// transactions (the claims, the fenced DONE updates): those prepare what the writers'
// transactions ran, so that a writer's pre-claimed INSERT runs prepared there too. It
// ran unprepared (prepared, run and closed by the driver, two round trips more) when
// only a call outside any transaction prepared, and the hot path left no poll to do it.
func TestMySQLMultiNodeWritesStayPrepared(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, store, counter := countedMySQL(t)
	// Two events a transaction, so that their DONE is one statement by a list of IDs,
	// which runs in the store's own transaction (READ COMMITTED).
	round := func(i int) {
		t.Helper()
		var ids, tokens []string
		err := outbox.RunInTx(ctx, db, func(ctx context.Context, tx *outbox.Tx) error {
			var events []outbox.Event
			for j := range 2 {
				id := fmt.Sprintf("claimed-%03d-%d", i, j)
				ids, tokens = append(ids, id), append(tokens, "node-1/"+id)
				events = append(events, outbox.Event{ID: id, Type: "Thing", AggregateType: "Thing", AggregateID: id,
					Payload: json.RawMessage(`{}`), CreatedAt: time.Now(), LockedBy: "node-1/" + id})
			}
			_, err := store.Insert(ctx, tx, storage.InsertParams{ClaimTTL: time.Minute, Events: events})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		n, err := store.MarkDone(ctx, storage.MarkDoneParams{IDs: ids, Tokens: tokens, DoneAt: time.Now()})
		if err != nil || n != 2 {
			t.Fatalf("MarkDone(%v) = %d, %v; want 2", ids, n, err)
		}
	}
	for i := range 2 {
		round(i)
	}
	before := counter.inserts.Load()
	for i := 2; i < 22; i++ {
		round(i)
	}
	if got := counter.inserts.Load() - before; got != 0 {
		t.Fatalf("20 pre-claimed writes, each followed by their fenced DONE, prepared the INSERT %d times; want none", got)
	}
}

// countedMySQL opens a store on a migrated table of its own, over one connection whose
// preparations the returned counter counts. One connection, so that every statement is
// prepared on the connection that runs it (with more, database/sql prepares a kept
// statement once on each connection it runs on).
func countedMySQL(t *testing.T) (*sql.DB, storage.Store, *mysqlPrepareCounter) {
	t.Helper()
	ctx := t.Context()
	cfg, err := mysql.ParseDSN(testdb.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.InterpolateParams = false // the documented DSN, whatever the test DSN sets
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	counter := &mysqlPrepareCounter{Connector: conn}
	db := sql.OpenDB(counter)
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxOpenConns(1)
	table := testdb.IsolatedTable(t, db, outbox.MySQL.Name())
	if err := outbox.MigrateTable(ctx, db, outbox.MySQL, table); err != nil {
		t.Fatal(err)
	}
	store, err := outbox.NewSQLStore(db, outbox.MySQL, outbox.SQLStoreConfig{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	return db, store, counter
}
