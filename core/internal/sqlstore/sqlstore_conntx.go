package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
)

// connTx is a READ COMMITTED transaction (MySQL/MariaDB syntax) on a connection of its
// own, whose every statement, COMMIT included, runs under the context it began with.
// database/sql's Tx.Commit and Tx.Rollback take no context, and
// github.com/go-sql-driver/mysql sends COMMIT and ROLLBACK without watching one: on a
// connection that dies between the last statement and the answer to COMMIT (a network
// partition that drops packets rather than resetting), they block until the operating
// system gives up on the connection, which can be never. Here COMMIT is a statement
// like the others, and Rollback sends nothing: it discards the connection, and the
// server rolls the transaction back when the connection closes.
type connTx struct {
	ctx  context.Context
	conn *sql.Conn
	done bool
}

// beginReadCommitted starts a connTx under ctx.
func (s *Store) beginReadCommitted(ctx context.Context) (*connTx, error) {
	if s.stmts != nil {
		s.stmts.prepareWanted(ctx) // before this transaction takes a connection
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	t := &connTx{ctx: ctx, conn: conn}
	for _, q := range [...]string{"SET TRANSACTION ISOLATION LEVEL READ COMMITTED", "START TRANSACTION"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.discard()
			return nil, err
		}
	}
	return t, nil
}

// ExecContext runs a statement in the transaction.
func (t *connTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return t.conn.ExecContext(ctx, query, args...)
}

// QueryContext runs a query in the transaction.
func (t *connTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return t.conn.QueryContext(ctx, query, args...)
}

// Commit commits under the transaction's context and returns the connection to the
// pool; on an error the connection is discarded.
func (t *connTx) Commit() error {
	if t.done {
		return sql.ErrTxDone
	}
	if _, err := t.conn.ExecContext(t.ctx, "COMMIT"); err != nil {
		t.discard()
		return err
	}
	t.done = true
	return t.conn.Close()
}

// Rollback discards the connection; the server rolls the transaction back.
func (t *connTx) Rollback() error {
	if t.done {
		return sql.ErrTxDone
	}
	t.discard()
	return nil
}

// discard closes the connection instead of returning it to the pool.
func (t *connTx) discard() {
	t.done = true
	_ = t.conn.Raw(func(any) error { return driver.ErrBadConn }) // makes database/sql close it
	_ = t.conn.Close()
}
