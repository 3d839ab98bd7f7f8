package chaos

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync/atomic"
	"testing"
)

// commitFault is what a faulty transaction does when it is committed.
type commitFault int

const (
	commitOK commitFault = iota
	// commitThenFail commits, then reports an error: the client cannot tell that the
	// commit happened (the connection broke while the OK was on its way).
	commitThenFail
	// rollbackThenFail rolls back and reports an error: the commit never happened.
	rollbackThenFail
)

// errCommitUnknown is the error a faulty commit returns.
var errCommitUnknown = errors.New("chaos: connection lost during COMMIT")

// faultConnector wraps a driver's connector: every transaction's Commit asks decide
// what to do.
type faultConnector struct {
	base   driver.Connector
	decide func() commitFault

	committedThenFailed, rolledBackThenFailed atomic.Int64
}

// openFaultDB opens a pool over driverName and dsn whose commits fail as decide says,
// and closes it when the test ends.
func openFaultDB(t testing.TB, driverName, dsn string, decide func() commitFault) (*sql.DB, *faultConnector) {
	t.Helper()
	probe, err := sql.Open(driverName, dsn)
	if err != nil {
		t.Fatal(err)
	}
	drv := probe.Driver()
	_ = probe.Close()
	var base driver.Connector
	if dc, ok := drv.(driver.DriverContext); ok {
		if base, err = dc.OpenConnector(dsn); err != nil {
			t.Fatal(err)
		}
	} else {
		base = dsnConnector{drv, dsn}
	}
	fc := &faultConnector{base: base, decide: decide}
	db := sql.OpenDB(fc)
	t.Cleanup(func() { _ = db.Close() })
	return db, fc
}

// dsnConnector is the connector of a driver without DriverContext.
type dsnConnector struct {
	drv driver.Driver
	dsn string
}

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c dsnConnector) Driver() driver.Driver                        { return c.drv }

func (c *faultConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.base.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &faultConn{Conn: conn, c: c}, nil
}

func (c *faultConnector) Driver() driver.Driver { return c.base.Driver() }

// faultConn forwards everything to the driver's connection, and wraps its transactions.
type faultConn struct {
	driver.Conn
	c *faultConnector
}

var (
	_ driver.ConnBeginTx         = (*faultConn)(nil)
	_ driver.ConnPrepareContext  = (*faultConn)(nil)
	_ driver.ExecerContext       = (*faultConn)(nil)
	_ driver.QueryerContext      = (*faultConn)(nil)
	_ driver.Pinger              = (*faultConn)(nil)
	_ driver.SessionResetter     = (*faultConn)(nil)
	_ driver.Validator           = (*faultConn)(nil)
	_ driver.NamedValueChecker   = (*faultConn)(nil)
	_ driver.Tx                  = (*faultTx)(nil)
	_ driver.Connector           = (*faultConnector)(nil)
	_ driver.Connector           = dsnConnector{}
	_ interface{ Close() error } = (*faultConn)(nil)
)

func (c *faultConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	var tx driver.Tx
	var err error
	if b, ok := c.Conn.(driver.ConnBeginTx); ok {
		tx, err = b.BeginTx(ctx, opts)
	} else {
		//lint:ignore SA1019 the fallback database/sql uses too
		tx, err = c.Conn.Begin()
	}
	if err != nil {
		return nil, err
	}
	return &faultTx{tx: tx, c: c.c}, nil
}

func (c *faultConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if p, ok := c.Conn.(driver.ConnPrepareContext); ok {
		return p.PrepareContext(ctx, query)
	}
	return c.Conn.Prepare(query)
}

func (c *faultConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if e, ok := c.Conn.(driver.ExecerContext); ok {
		return e.ExecContext(ctx, query, args)
	}
	return nil, driver.ErrSkip
}

func (c *faultConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if q, ok := c.Conn.(driver.QueryerContext); ok {
		return q.QueryContext(ctx, query, args)
	}
	return nil, driver.ErrSkip
}

func (c *faultConn) Ping(ctx context.Context) error {
	if p, ok := c.Conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *faultConn) ResetSession(ctx context.Context) error {
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *faultConn) IsValid() bool {
	if v, ok := c.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *faultConn) CheckNamedValue(nv *driver.NamedValue) error {
	if n, ok := c.Conn.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// faultTx is a transaction whose Commit may fail.
type faultTx struct {
	tx driver.Tx
	c  *faultConnector
}

func (t *faultTx) Commit() error {
	switch t.c.decide() {
	case commitThenFail:
		if err := t.tx.Commit(); err != nil {
			return err
		}
		t.c.committedThenFailed.Add(1)
		return errCommitUnknown
	case rollbackThenFail:
		if err := t.tx.Rollback(); err != nil {
			return err
		}
		t.c.rolledBackThenFailed.Add(1)
		return errCommitUnknown
	}
	return t.tx.Commit()
}

func (t *faultTx) Rollback() error { return t.tx.Rollback() }
