package outboxgorm

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"gorm.io/gorm"
	_ "modernc.org/sqlite"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/adapterkit"
)

func TestParseSavepoint(t *testing.T) {
	t.Parallel()
	tests := []struct {
		query string
		want  savepointOp
		ok    bool
	}{
		{"SAVEPOINT sp1", savepointOp{opSavepoint, "sp1"}, true},
		{"  savepoint Sp1 ;  ", savepointOp{opSavepoint, "sp1"}, true},
		{"SAVEPOINT sp123456789", savepointOp{opSavepoint, "sp123456789"}, true},
		{`SAVEPOINT "My Sp"`, savepointOp{opSavepoint, "My Sp"}, true},
		{"SAVEPOINT `Sp`", savepointOp{opSavepoint, "Sp"}, true},
		{"\tSAVEPOINT\n sp1", savepointOp{opSavepoint, "sp1"}, true},
		{"ROLLBACK TO SAVEPOINT sp1", savepointOp{opRollbackTo, "sp1"}, true},
		{"rollback to sp1;", savepointOp{opRollbackTo, "sp1"}, true},
		{"ROLLBACK WORK TO SAVEPOINT sp1", savepointOp{opRollbackTo, "sp1"}, true},
		{"ROLLBACK TRANSACTION TO sp1", savepointOp{opRollbackTo, "sp1"}, true},
		{"ROLLBACK TO savepoint", savepointOp{opRollbackTo, "savepoint"}, true},
		{"RELEASE SAVEPOINT sp1", savepointOp{opRelease, "sp1"}, true},
		{"release sp1", savepointOp{opRelease, "sp1"}, true},
		{"RELEASE savepoint", savepointOp{opRelease, "savepoint"}, true},
		{"", savepointOp{}, false},
		{"   ", savepointOp{}, false},
		{"SAVEPOINT", savepointOp{}, false},
		{"SAVEPOINT ;", savepointOp{}, false},
		{"SAVEPOINT a b", savepointOp{}, false},
		{"ROLLBACK", savepointOp{}, false},
		{"ROLLBACK;", savepointOp{}, false},
		{"ROLLBACK TRANSACTION", savepointOp{}, false},
		{"ROLLBACK TO", savepointOp{}, false},
		{"RELEASE", savepointOp{}, false},
		{"SAVEPOINTS sp1", savepointOp{}, false},
		{"SELECT 'SAVEPOINT sp1'", savepointOp{}, false},
		{"INSERT INTO savepoint (id) VALUES (1)", savepointOp{}, false},
		{"SET x = 1", savepointOp{}, false},
		{"REPLACE INTO t VALUES (1)", savepointOp{}, false},
	}
	for _, tt := range tests {
		got, ok := parseSavepoint(tt.query)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseSavepoint(%q) = %+v, %v; want %+v, %v", tt.query, got, ok, tt.want, tt.ok)
		}
	}
}

// fakeTx is a gorm.Tx that records statements and returns the configured errors.
type fakeTx struct {
	execs                  []string
	execErr                error
	commitErr, rollbackErr error
}

var _ gorm.Tx = (*fakeTx)(nil)

func (f *fakeTx) PrepareContext(context.Context, string) (*sql.Stmt, error) {
	return nil, errors.New("fake: prepare")
}

func (f *fakeTx) ExecContext(_ context.Context, query string, _ ...any) (sql.Result, error) {
	f.execs = append(f.execs, query)
	return driver.RowsAffected(0), f.execErr
}

func (f *fakeTx) QueryContext(context.Context, string, ...any) (*sql.Rows, error) {
	return nil, errors.New("fake: query")
}

func (f *fakeTx) QueryRowContext(context.Context, string, ...any) *sql.Row { return nil }
func (f *fakeTx) StmtContext(_ context.Context, s *sql.Stmt) *sql.Stmt     { return s }
func (f *fakeTx) Commit() error                                            { return f.commitErr }
func (f *fakeTx) Rollback() error                                          { return f.rollbackErr }

// recorder registers numbered callbacks and records which ran.
type recorder struct{ ran []string }

func (r *recorder) register(h adapterkit.Registrar, name string) {
	h.AfterCommit(func() { r.ran = append(r.ran, "commit "+name) })
	h.AfterRollback(func() { r.ran = append(r.ran, "rollback "+name) })
}

func (r *recorder) take() []string {
	ran := r.ran
	r.ran = nil
	return ran
}

func TestTxPoolEnd(t *testing.T) {
	t.Parallel()
	errCommit := errors.New("commit failed")
	tests := []struct {
		name    string
		fake    fakeTx
		end     func(p *txPool) error
		wantErr error
		want    []string
	}{
		{"commit", fakeTx{}, (*txPool).Commit, nil, []string{"commit a"}},
		{"commit fails", fakeTx{commitErr: errCommit}, (*txPool).Commit, errCommit, []string{"rollback a"}},
		{"commit after the end", fakeTx{commitErr: sql.ErrTxDone}, (*txPool).Commit, sql.ErrTxDone, nil},
		{"rollback", fakeTx{}, (*txPool).Rollback, nil, []string{"rollback a"}},
		{"rollback fails", fakeTx{rollbackErr: errCommit}, (*txPool).Rollback, errCommit, []string{"rollback a"}},
		{"rollback after the end", fakeTx{rollbackErr: sql.ErrTxDone}, (*txPool).Rollback, sql.ErrTxDone, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newTxPool(&tt.fake, nil)
			var r recorder
			r.register(p, "a")
			if err := tt.end(p); !errors.Is(err, tt.wantErr) {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
			if got := r.take(); !slices.Equal(got, tt.want) {
				t.Errorf("callbacks ran: %q, want %q", got, tt.want)
			}
			if len(tt.want) == 0 {
				return
			}
			// GORM rolls back after a failed commit: nothing runs twice.
			_ = p.Rollback()
			_ = p.Commit()
			if got := r.take(); len(got) != 0 {
				t.Errorf("callbacks ran again: %q", got)
			}
		})
	}
}

func TestTxPoolSavepoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fake := &fakeTx{}
	p := newTxPool(fake, nil)
	var r recorder
	exec := func(q string) {
		t.Helper()
		if _, err := p.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	expect := func(want ...string) {
		t.Helper()
		if got := r.take(); !slices.Equal(got, want) {
			t.Errorf("callbacks ran: %q, want %q", got, want)
		}
	}

	r.register(p, "a")
	exec("SAVEPOINT s1")
	r.register(p, "b")
	exec("SAVEPOINT s2")
	r.register(p, "c")
	exec("ROLLBACK TO SAVEPOINT s1") // drops s2 and everything after s1
	expect("rollback b", "rollback c")
	r.register(p, "d")
	exec("ROLLBACK TO SAVEPOINT s2") // never seen (s2 is gone): everything goes
	expect("rollback a", "rollback d")

	r.register(p, "e")
	exec("SAVEPOINT s1") // a second s1, after the first
	r.register(p, "f")
	exec("RELEASE SAVEPOINT s1") // releases the newest s1 only
	exec("ROLLBACK TO s1")       // back to the first s1, older than every callback left
	expect("rollback e", "rollback f")

	r.register(p, "g")
	fake.execErr = errors.New("no such savepoint")
	if _, err := p.ExecContext(ctx, "ROLLBACK TO SAVEPOINT s1"); err == nil {
		t.Fatal("want the statement's error")
	}
	expect() // a failed rollback forgets nothing
	fake.execErr = nil

	if err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	expect("commit g")
	want := []string{"SAVEPOINT s1", "SAVEPOINT s2", "ROLLBACK TO SAVEPOINT s1", "ROLLBACK TO SAVEPOINT s2",
		"SAVEPOINT s1", "RELEASE SAVEPOINT s1", "ROLLBACK TO s1", "ROLLBACK TO SAVEPOINT s1"}
	if !slices.Equal(fake.execs, want) {
		t.Errorf("statements: %q, want %q", fake.execs, want)
	}
}

// TestTxPoolQuerySavepoints: savepoint statements run as queries are tracked before
// they run, whatever their outcome.
func TestTxPoolQuerySavepoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newTxPool(&fakeTx{}, nil)
	var r recorder
	p.QueryRowContext(ctx, "SAVEPOINT sp1")
	r.register(p, "a")
	if _, err := p.QueryContext(ctx, "ROLLBACK TO SAVEPOINT sp1"); err == nil {
		t.Fatal("want the fake's error")
	}
	if got := r.take(); !slices.Equal(got, []string{"rollback a"}) {
		t.Errorf("callbacks ran: %q, want [rollback a]", got)
	}
}

// TestTxPoolUnprepared: savepoint statements bypass a *gorm.PreparedStmtTX (it would
// prepare them, and MySQL refuses to), other statements go through it.
func TestTxPoolUnprepared(t *testing.T) {
	t.Parallel()
	fake := &fakeTx{}
	p := newTxPool(&gorm.PreparedStmtTX{Tx: &gorm.PreparedStmtTX{Tx: fake}}, nil)
	if _, err := p.ExecContext(context.Background(), "SAVEPOINT sp1"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fake.execs, []string{"SAVEPOINT sp1"}) {
		t.Errorf("inner transaction ran %q", fake.execs)
	}
	if got := unprepared(&gorm.PreparedStmtTX{}); got == nil {
		t.Error("unprepared of an empty PreparedStmtTX returned nil")
	}
}

// TestStmtQuery: the SQL of a prepared statement is read back, so that savepoint
// statements run through a *gorm.PreparedStmtTX are seen; a savepoint made through a
// prepared statement is tracked.
func TestStmtQuery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := sql.Open("sqlite", outbox.SQLiteDSN(filepath.Join(t.TempDir(), "stmt.db")))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stmt, err := db.PrepareContext(ctx, "SELECT 1")
	if err != nil {
		t.Fatal(err)
	}
	defer stmt.Close()
	if got := stmtQuery(stmt); got != "SELECT 1" {
		t.Errorf("stmtQuery = %q, want %q", got, "SELECT 1")
	}
	if got := stmtQuery(nil); got != "" {
		t.Errorf("stmtQuery(nil) = %q", got)
	}

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	p := newTxPool(tx, db)
	var r recorder
	r.register(p, "a")
	for _, q := range []string{"SAVEPOINT sp1", "ROLLBACK TO SAVEPOINT sp1"} {
		s, err := p.PrepareContext(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if q == "ROLLBACK TO SAVEPOINT sp1" {
			r.register(p, "b")
		}
		if _, err := p.StmtContext(ctx, s).ExecContext(ctx); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if got := r.take(); !slices.Equal(got, []string{"rollback b"}) {
		t.Errorf("callbacks ran: %q, want [rollback b]", got)
	}
}

func TestTxPoolGetDBConn(t *testing.T) {
	t.Parallel()
	db := &sql.DB{}
	for name, p := range map[string]*txPool{
		"parent *sql.DB":        newTxPool(&fakeTx{}, db),
		"parent PreparedStmtDB": newTxPool(&fakeTx{}, &gorm.PreparedStmtDB{ConnPool: db}),
		"inner PreparedStmtTX":  newTxPool(&gorm.PreparedStmtTX{Tx: &fakeTx{}, PreparedStmtDB: &gorm.PreparedStmtDB{ConnPool: db}}, nil),
	} {
		if got, err := p.GetDBConn(); got != db || err != nil {
			t.Errorf("%s: GetDBConn = %p, %v; want %p", name, got, err, db)
		}
	}
	if _, err := newTxPool(&fakeTx{}, nil).GetDBConn(); !errors.Is(err, gorm.ErrInvalidDB) {
		t.Errorf("no *sql.DB: %v, want gorm.ErrInvalidDB", err)
	}
}
