package outboxgorm_test

import (
	"sync"
	"testing"

	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/adapterkit"
	"github.com/outboxkit/outbox/internal/adaptertest"
)

// mode is how a test uses prepared statements.
type mode struct {
	name string
	// global opens GORM with gorm.Config{PrepareStmt: true}: the transaction's pool is
	// a *gorm.PreparedStmtTX.
	global bool
	// session runs the transaction's work through tx.Session(&gorm.Session{PrepareStmt:
	// true}): a *gorm.PreparedStmtTX wraps the adapter's pool.
	session bool
}

var modes = []mode{
	{name: "plain"},
	{name: "PrepareStmt", global: true},
	{name: "SessionPrepareStmt", session: true},
	{name: "BothPrepareStmt", global: true, session: true},
}

// in returns the *gorm.DB the test's transaction code uses.
func (m mode) in(tx *gorm.DB) *gorm.DB {
	if m.session {
		return tx.Session(&gorm.Session{PrepareStmt: true})
	}
	return tx
}

// bundle is the harness's bundle with a *gorm.DB over its *sql.DB.
type bundle struct {
	*adaptertest.Bundle
	gdb *gorm.DB
}

// forEach runs fn as a parallel subtest per backend and mode, each on a fresh bundle.
func forEach(t *testing.T, modes []mode, fn func(t *testing.T, b *bundle, m mode)) {
	t.Helper()
	adaptertest.ForEach(t, func(t *testing.T, be adaptertest.Backend) {
		for _, m := range modes {
			t.Run(m.name, func(t *testing.T) {
				t.Parallel()
				fn(t, setup(t, be, m), m)
			})
		}
	})
}

func setup(t *testing.T, be adaptertest.Backend, m mode) *bundle {
	t.Helper()
	b := adaptertest.Setup(t, be, adaptertest.Options{})
	return &bundle{Bundle: b, gdb: openGorm(t, b, m.global)}
}

// openGorm opens GORM on the bundle's *sql.DB, so that GORM and the outbox share it.
func openGorm(t *testing.T, b *adaptertest.Bundle, prepare bool) *gorm.DB {
	t.Helper()
	var d gorm.Dialector
	switch b.Backend.Name {
	case "sqlite":
		d = sqlite.New(sqlite.Config{Conn: b.DB})
	case "postgres":
		d = postgres.New(postgres.Config{Conn: b.DB})
	case "mysql":
		d = mysql.New(mysql.Config{Conn: b.DB})
	default:
		t.Fatalf("unknown backend %q", b.Backend.Name)
	}
	gdb, err := gorm.Open(d, &gorm.Config{
		Logger:      logger.Default.LogMode(logger.Silent),
		PrepareStmt: prepare,
	})
	if err != nil {
		t.Fatalf("open gorm: %v", err)
	}
	return gdb
}

// insertOrder inserts a business row through GORM.
func (b *bundle) insertOrder(tx *gorm.DB, id string) error {
	return tx.Exec("INSERT INTO "+b.Orders+" (id) VALUES (?)", id).Error
}

// ids returns a fresh event ID per label.
func ids(labels ...string) map[string]string {
	m := make(map[string]string, len(labels))
	for _, l := range labels {
		m[l] = outbox.NewID()
	}
	return m
}

// pick returns the IDs of labels.
func pick(ids map[string]string, labels ...string) []string {
	out := make([]string, len(labels))
	for i, l := range labels {
		out[i] = ids[l]
	}
	return out
}

// txCounter counts the callbacks that ran for a transaction.
type txCounter struct {
	mu                    sync.Mutex
	committed, rolledBack int
}

// register registers the counter's callbacks on tx's transaction, which must come from
// outboxgorm.Transaction.
func (c *txCounter) register(t *testing.T, exec outbox.Executor) {
	t.Helper()
	hooks, ok := exec.(adapterkit.Registrar)
	if !ok {
		t.Fatalf("executor %T does not implement adapterkit.Registrar", exec)
	}
	hooks.AfterCommit(func() { c.mu.Lock(); c.committed++; c.mu.Unlock() })
	hooks.AfterRollback(func() { c.mu.Lock(); c.rolledBack++; c.mu.Unlock() })
}

func (c *txCounter) get() (committed, rolledBack int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.committed, c.rolledBack
}
