package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/outboxkit/outbox/core/internal/check"
	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// The SQL store: its configuration, New, the reads of single rows and batches of
// events (Get, Pending), the connection check and Stats. The other methods are in the
// sqlstore_*.go files by concern; each database's ordered writes and promote are in
// postgres.go, mysql.go and sqlite.go.

// defaultStoreQueryTimeout bounds each statement the SQL store runs on its own.
const defaultStoreQueryTimeout = 10 * time.Second

// Config configures [New].
type Config struct {
	// Table is the outbox table, optionally schema-qualified ("app.outbox_event"). It
	// must match ^[A-Za-z_][A-Za-z0-9_]{0,62}$, optionally "schema.table", and is
	// always quoted. Required.
	Table string
	// QueryTimeout bounds every statement the store runs on its own connection (all
	// methods but Insert, which runs on the caller's executor under the caller's
	// context). -1 disables the bound; 0 means 10 seconds.
	QueryTimeout time.Duration
	// TxOf returns the *sql.DB and *sql.Tx behind an executor that wraps a transaction
	// (package outbox's *Tx), so that Insert through it can use the statement cache of
	// the store's DB; nil, or ok false, runs the executor as it is.
	TxOf func(exec outboxtype.Executor) (db *sql.DB, tx *sql.Tx, ok bool)
}

// Store is the SQL store: a [storage.Store] with every optional capability of package
// storage, for PostgreSQL, MySQL/MariaDB and SQLite.
type Store struct {
	db      *sql.DB
	d       *dialect
	table   tableName
	timeout time.Duration
	txOf    func(outboxtype.Executor) (*sql.DB, *sql.Tx, bool)
	stmts   *stmtCache // nil when d.cachedStatements is 0; see on
	idle    *idleKeys  // keys seen idle outside a writer's transaction (MySQL, SQLite); nil elsewhere
	// packet is the server's max_allowed_packet once the first write has read it
	// (dialect.packetLimited), else 0; see checkPacket.
	packet atomic.Int64
	// aggregateIndexed is set once the table is seen to have CreateAggregateIndex's
	// index (see aggregateIndex).
	aggregateIndexed atomic.Bool
	// parts is what the store last read of its table's partitioning (PostgreSQL), nil
	// before its first write or check; see checkPartitions.
	parts atomic.Pointer[partitionSet]
}

var (
	_ storage.Store             = (*Store)(nil)
	_ storage.ConnectionChecker = (*Store)(nil)
)

// New returns the SQL store on db for dialect d. It does no I/O. It returns a
// *ConfigError when db or d is nil, the table name is invalid or QueryTimeout is
// negative other than -1.
//
// Values are bound as arguments; times are stored in UTC, truncated to microseconds.
func New(db *sql.DB, d *Dialect, cfg Config) (*Store, error) {
	if db == nil {
		return nil, &outboxtype.ConfigError{Field: "DB", Reason: "nil *sql.DB"}
	}
	if d == nil {
		return nil, &outboxtype.ConfigError{Field: "Dialect", Reason: "nil; use outbox.Postgres, outbox.MySQL or outbox.SQLite"}
	}
	t, err := parseTableName(cfg.Table)
	if err != nil {
		return nil, err
	}
	if cfg.QueryTimeout < 0 && cfg.QueryTimeout != -1 {
		return nil, &outboxtype.ConfigError{Field: "QueryTimeout", Reason: fmt.Sprintf("%s is negative; use -1 to disable", cfg.QueryTimeout)}
	}
	s := &Store{db: db, d: d, table: t, timeout: cmp.Or(cfg.QueryTimeout, defaultStoreQueryTimeout), txOf: cfg.TxOf}
	if n := s.d.cachedStatements; n > 0 {
		s.stmts = newStmtCache(db, n)
	}
	if s.d.order.keepsIdleKeys() {
		s.idle = newIdleKeys()
	}
	return s, nil
}

// DB is the store's *sql.DB.
func (s *Store) DB() *sql.DB { return s.db }

// Dialect is the store's dialect.
func (s *Store) Dialect() *Dialect { return s.d }

// withTimeout bounds one statement by the configured QueryTimeout.
func (s *Store) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.timeout < 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, s.timeout)
}

// Get implements [Store.Get]. It returns an error wrapping [ErrNotFound] when no row
// has the ID, and one wrapping a [RowError] when the row's times cannot be decoded.
func (s *Store) Get(ctx context.Context, id string) (outboxtype.Event, error) {
	if !check.PossibleID(id) {
		return outboxtype.Event{}, fmt.Errorf("get event %q: %w", id, outboxtype.ErrNotFound)
	}
	q := s.d.getQuery(s.table, id)
	events, bad, err := s.queryEvents(ctx, s.db, q, lenient)
	switch {
	case err != nil:
		return outboxtype.Event{}, fmt.Errorf("get event %s: %w", id, err)
	case len(bad) > 0:
		return outboxtype.Event{}, fmt.Errorf("get: %w", bad[0])
	case len(events) == 0:
		return outboxtype.Event{}, fmt.Errorf("get event %s: %w", id, outboxtype.ErrNotFound)
	}
	return events[0], nil
}

// Pending implements [Store.Pending].
func (s *Store) Pending(ctx context.Context, p storage.PendingParams) (storage.PendingBatch, error) {
	q, err := s.d.pendingQuery(s.table, p)
	if err != nil {
		return storage.PendingBatch{}, fmt.Errorf("pending: %w", err)
	}
	events, bad, err := s.queryEvents(ctx, s.on(s.db), q, strict)
	if err != nil {
		return storage.PendingBatch{}, fmt.Errorf("pending: %w", err)
	}
	return storage.PendingBatch{Events: events, Undecodable: bad}, nil
}

// queryEvents runs q, a statement of selectColumns, and decodes its rows in mode. When
// the statement fails in a way that one row can cause, its rows are read again one by
// one (isolate): in strict mode a row that cannot be read or decoded comes back in
// bad, in lenient mode with a placeholder payload. Only a statement that may run again
// after failing may come here (a SELECT, or an UPDATE … RETURNING undone whole).
//
// Each statement runs under its own QueryTimeout (ctx has none of the store's).
func (s *Store) queryEvents(ctx context.Context, exec outboxtype.Executor, q query, mode decodeMode) (events []outboxtype.Event, bad []outboxtype.RowError, err error) {
	qctx, cancel := s.withTimeout(ctx)
	rows, err := exec.QueryContext(qctx, q.SQL, q.Args...)
	if err == nil {
		events, bad, err = scanEvents(rows, s.d, mode)
		// Closed before any other statement: a pool of one connection (SQLite) has
		// none other to run isolate's.
		err = errors.Join(err, rows.Close())
	}
	if err != nil && qctx.Err() != nil && ctx.Err() == nil {
		err = errors.Join(err, qctx.Err()) // the statement's own timeout: maybe a row's (rowFault)
	}
	cancel()
	if err == nil {
		return events, bad, nil
	}
	iso, ierr := s.isolate(ctx, exec, q, err, mode)
	if ierr != nil {
		return nil, nil, ierr
	}
	events, bad = splitIsolated(iso)
	return events, bad, nil
}

// CheckConnection verifies that the store's connection pool is configured the way its
// dialect needs. For [MySQL] it checks that DATETIME values scan as time.Time and that
// the driver sends and parses times in UTC (the DSN carries [MySQLDSNParams]), and that
// the connection character set is utf8mb4; a connection that breaks one of these rules
// would store wrong times or text without any error, so it returns a *[ConfigError]
// with Field "DSN" naming the fix. On every database it returns a *[ConfigError] with
// Field "Table" when the table exists but lacks a later migration. Any other error is
// the database's, for example an unreachable server.
// [Outbox.Start] runs it before it starts anything.
func (s *Store) CheckConnection(ctx context.Context) error { return s.CheckConnectionFor(ctx, 0) }

// CheckConnectionFor is CheckConnection that also checks, when maxPayload is positive, that
// the server takes a payload of maxPayload bytes ([MySQL]: max_allowed_packet).
// [Outbox.Start] runs it with Config.MaxPayloadBytes.
func (s *Store) CheckConnectionFor(ctx context.Context, maxPayload int) error {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	if s.d.checkConn != nil {
		if err := s.d.checkConn(ctx, s.db, maxPayload); err != nil {
			return err
		}
	}
	if err := s.checkTable(ctx); err != nil {
		return err
	}
	if s.d == postgresDialect {
		ps, err := s.loadPartitions(ctx, s.db)
		if err != nil {
			return err
		}
		s.parts.Store(ps)
	}
	return nil
}

// checkTable returns a *[ConfigError] when the table exists but lacks a column or index
// that a later migration adds and the queries use. A version that only drops the key
// table's index is not checked: the queries work with the index there (writes pay its
// upkeep until MigrateTable drops it), so an upgraded library starts on such a table.
// Nor is an optional one (the lease: Start runs without it, with a warning).
func (s *Store) checkTable(ctx context.Context) error {
	later := s.d.ddl(s.d, s.table).later
	if len(later) == 0 {
		return nil
	}
	if exists, err := hasColumn(ctx, s.db, s.d, s.table, "event_id"); err != nil || !exists {
		return err // no table yet: the first query will say so
	}
	for _, m := range later {
		if m.droppedKeyIndex != "" || m.droppedIndex != "" || m.optional {
			continue
		}
		has, err := m.applied(ctx, s.db, s.d, s.table)
		if err != nil {
			return err
		}
		if !has {
			what := "column " + m.column
			switch {
			case m.index != "":
				what = "index " + s.table.indexName(m.index)
			case m.trigger != "":
				what = "trigger " + s.table.indexName(m.trigger)
			}
			return &outboxtype.ConfigError{Field: "Table", Reason: fmt.Sprintf("%s has no %s: run outbox.MigrateTable, "+
				"or the migration %s from outbox.Migrations, to upgrade it", s.table, what, m.name)}
		}
	}
	return nil
}

// Stats implements [StatsStore.Stats] with one grouped query. It counts every row, so its
// cost grows with the table; keep the table small with purging.
func (s *Store) Stats(ctx context.Context) (outboxtype.Stats, error) {
	q := s.d.statsQuery(s.table)
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	rows, err := s.db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return outboxtype.Stats{}, fmt.Errorf("stats: %w", err)
	}
	defer rows.Close()
	st := outboxtype.Stats{Counts: make(map[outboxtype.Status]int64, 4)}
	for rows.Next() {
		var status, count, oldest any
		if err := rows.Scan(&status, &count, &oldest); err != nil {
			return outboxtype.Stats{}, fmt.Errorf("stats: %w", err)
		}
		st1, err1 := intValue(status)
		n, err2 := intValue(count)
		if err := errors.Join(err1, err2); err != nil {
			return outboxtype.Stats{}, fmt.Errorf("stats: %w", err)
		}
		st.Counts[outboxtype.Status(st1)] = n
		if outboxtype.Status(st1) != outboxtype.StatusNew && outboxtype.Status(st1) != outboxtype.StatusRetry {
			continue
		}
		t, err := s.d.decodeTime(oldest)
		if err != nil {
			return outboxtype.Stats{}, fmt.Errorf("stats: oldest %s: %w", outboxtype.Status(st1), err)
		}
		if st.OldestPending.IsZero() || t.Before(st.OldestPending) {
			st.OldestPending = t
		}
	}
	if err := rows.Err(); err != nil {
		return outboxtype.Stats{}, fmt.Errorf("stats: %w", err)
	}
	if st.Counts[outboxtype.StatusWaiting] == 0 {
		return st, nil // no key can be blocked
	}
	q = s.d.blockedKeysQuery(s.table)
	var oldest any
	if err := s.db.QueryRowContext(ctx, q.SQL, q.Args...).Scan(&st.BlockedKeys, &oldest); err != nil {
		return outboxtype.Stats{}, fmt.Errorf("stats: blocked keys: %w", err)
	}
	if oldest != nil {
		t, err := s.d.decodeTime(oldest)
		if err != nil {
			return outboxtype.Stats{}, fmt.Errorf("stats: oldest blocked: %w", err)
		}
		st.OldestBlocked = t
	}
	return st, nil
}
