package outboxgorm

import (
	"context"
	"database/sql"
	"errors"
	"reflect"
	"sync"

	"gorm.io/gorm"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/adapterkit"
)

// txPool is the gorm.ConnPool of a transaction begun by [Transaction]. It wraps the pool
// GORM began (a *sql.Tx, or a *gorm.PreparedStmtTX under PrepareStmt), so that every
// *gorm.DB derived from the transaction carries it. It runs the transaction's callbacks
// when GORM commits or rolls back, and follows savepoints so that a rollback to one
// forgets the callbacks registered after it.
//
// It implements gorm.Tx, so GORM treats it as a transaction (nested Transaction calls
// become savepoints, Session{PrepareStmt: true} wraps it in a *gorm.PreparedStmtTX), and
// gorm.GetDBConnector, so tx.DB() works.
type txPool struct {
	inner  gorm.Tx       // what GORM began
	parent gorm.ConnPool // what it was begun on, for GetDBConn
	cb     adapterkit.Callbacks

	mu         sync.Mutex
	savepoints []savepoint // open savepoints, oldest first
}

var (
	_ gorm.Tx              = (*txPool)(nil)
	_ gorm.GetDBConnector  = (*txPool)(nil)
	_ outbox.Executor      = (*txPool)(nil)
	_ adapterkit.Registrar = (*txPool)(nil)
)

// savepoint is an open savepoint and the callbacks mark taken when it was created.
type savepoint struct {
	name string
	mark int
}

func newTxPool(inner gorm.Tx, parent gorm.ConnPool) *txPool {
	return &txPool{inner: inner, parent: parent}
}

// PrepareContext prepares a statement in the transaction.
func (p *txPool) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return p.inner.PrepareContext(ctx, query)
}

// ExecContext runs a statement in the transaction. Savepoint statements run unprepared
// and, when they succeed, update the savepoint bookkeeping.
func (p *txPool) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	op, ok := parseSavepoint(query)
	if !ok {
		return p.inner.ExecContext(ctx, query, args...)
	}
	res, err := unprepared(p.inner).ExecContext(ctx, query, args...)
	if err == nil {
		p.track(op)
	}
	return res, err
}

// QueryContext runs a query in the transaction. Savepoint statements are handled as by
// [txPool.StmtContext].
func (p *txPool) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return p.trackFirst(query).QueryContext(ctx, query, args...)
}

// QueryRowContext runs a query expected to return at most one row. Savepoint statements
// are handled as by [txPool.StmtContext].
func (p *txPool) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return p.trackFirst(query).QueryRowContext(ctx, query, args...)
}

// trackFirst returns the transaction to run query on. A savepoint statement is tracked
// before it runs, since a query's outcome is only known when it is read, and runs
// unprepared.
func (p *txPool) trackFirst(query string) gorm.Tx {
	if op, ok := parseSavepoint(query); ok {
		p.track(op)
		return unprepared(p.inner)
	}
	return p.inner
}

// StmtContext returns stmt bound to the transaction. A *gorm.PreparedStmtTX that wraps p
// runs every statement through it, cached ones included, so a savepoint statement run as
// a prepared statement is seen here. Its outcome is not, so it is tracked before it runs:
// tracking a statement that then fails never publishes an event wrongly (a rollback to a
// savepoint that is then unknown forgets every callback), it only costs events the hot
// path, and the poller delivers them.
func (p *txPool) StmtContext(ctx context.Context, stmt *sql.Stmt) *sql.Stmt {
	if op, ok := parseSavepoint(stmtQuery(stmt)); ok {
		p.track(op)
	}
	return p.inner.StmtContext(ctx, stmt)
}

// Commit commits the transaction, then runs the after-commit callbacks. When the commit
// fails, the after-rollback callbacks run instead.
func (p *txPool) Commit() error {
	if err := p.inner.Commit(); err != nil {
		if !errors.Is(err, sql.ErrTxDone) {
			p.cb.RolledBack()
		}
		return err
	}
	p.cb.Committed()
	return nil
}

// Rollback rolls the transaction back, then runs the after-rollback callbacks.
func (p *txPool) Rollback() error {
	err := p.inner.Rollback()
	if !errors.Is(err, sql.ErrTxDone) {
		p.cb.RolledBack()
	}
	return err
}

// GetDBConn returns the *sql.DB the transaction runs on.
func (p *txPool) GetDBConn() (*sql.DB, error) {
	for _, pool := range []gorm.ConnPool{p.inner, p.parent} {
		switch c := pool.(type) {
		case *sql.DB:
			return c, nil
		case gorm.GetDBConnector:
			if db, err := c.GetDBConn(); db != nil || err != nil {
				return db, err
			}
		}
	}
	return nil, gorm.ErrInvalidDB
}

// AfterCommit registers fn to run after the outermost commit succeeds.
func (p *txPool) AfterCommit(fn func()) { p.cb.AfterCommit(fn) }

// AfterRollback registers fn to run after a rollback, a failed commit, or a rollback to
// a savepoint created before the registration.
func (p *txPool) AfterRollback(fn func()) { p.cb.AfterRollback(fn) }

// track updates the open savepoints after a savepoint statement. SQL keeps a savepoint
// that was rolled back to and drops the ones created after it; RELEASE drops the
// savepoint and the ones after it. A name is looked up from the newest savepoint.
func (p *txPool) track(op savepointOp) {
	p.mu.Lock()
	if op.kind == opSavepoint {
		p.savepoints = append(p.savepoints, savepoint{name: op.name, mark: p.cb.Savepoint()})
		p.mu.Unlock()
		return
	}
	i := len(p.savepoints) - 1
	for i >= 0 && p.savepoints[i].name != op.name {
		i--
	}
	if op.kind == opRelease {
		if i >= 0 {
			p.savepoints = p.savepoints[:i]
		}
		p.mu.Unlock()
		return
	}
	mark := 0
	if i >= 0 {
		mark = p.savepoints[i].mark
		p.savepoints = p.savepoints[:i+1]
	} else {
		// A savepoint this pool never saw: forget every callback, to be safe. Rolling
		// back to a savepoint seen earlier must then forget every later one too.
		for j := range p.savepoints {
			p.savepoints[j].mark = 0
		}
	}
	p.mu.Unlock()
	p.cb.RollbackTo(mark) // runs after-rollback callbacks: not under p.mu
}

// unprepared returns the transaction under any *gorm.PreparedStmtTX wrappers, as GORM's
// own SavePoint and RollbackTo do.
func unprepared(tx gorm.Tx) gorm.Tx {
	for {
		ps, ok := tx.(*gorm.PreparedStmtTX)
		if !ok || ps == nil || ps.Tx == nil {
			return tx
		}
		tx = ps.Tx
	}
}

// stmtQuery returns the SQL a prepared statement was created from. database/sql keeps it
// unexported; reading a string field through reflection is safe, and a later Go release
// without the field makes this return "".
func stmtQuery(stmt *sql.Stmt) string {
	if stmt == nil {
		return ""
	}
	f := reflect.ValueOf(stmt).Elem().FieldByName("query")
	if f.Kind() != reflect.String {
		return ""
	}
	return f.String()
}
