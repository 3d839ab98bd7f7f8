package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/mysqldialect"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"github.com/uptrace/bun/schema"
	gormmysql "gorm.io/driver/mysql"
	gormpostgres "gorm.io/driver/postgres"
	gormsqlite "gorm.io/driver/sqlite"
	"gorm.io/gorm"
	gormlogger "gorm.io/gorm/logger"

	outboxbun "github.com/outboxkit/outbox/adapters/bun"
	outboxgorm "github.com/outboxkit/outbox/adapters/gorm"
	outbox "github.com/outboxkit/outbox/core"
)

// savepointTx is one business transaction of the savepoint scenario. It writes events
// in the outer transaction, in nested transactions that commit and in nested ones that
// roll back (and, when outerRollback is set, rolls the whole transaction back). It
// returns the events that must be delivered (if the commit succeeds) and those that
// must never be.
type savepointTx func(ctx context.Context, prefix string, outerRollback bool) (keep, drop []string, err error)

// gormSavepoints runs business transactions through outboxgorm.Transaction, nesting
// with outboxgorm.Transaction, GORM's tx.Transaction, and tx.SavePoint/RollbackTo.
func (s *scene) gormSavepoints(t *testing.T, w *outbox.Writer) savepointTx {
	var d gorm.Dialector
	switch s.be.name {
	case "sqlite":
		d = gormsqlite.New(gormsqlite.Config{Conn: s.db})
	case "postgres":
		d = gormpostgres.New(gormpostgres.Config{Conn: s.db})
	case "mysql":
		d = gormmysql.New(gormmysql.Config{Conn: s.db, SkipInitializeWithVersion: true})
	}
	gdb, err := gorm.Open(d, &gorm.Config{Logger: gormlogger.Discard, SkipDefaultTransaction: true})
	if err != nil {
		t.Fatal(err)
	}
	insert := "INSERT INTO " + s.orders + " (id) VALUES (?)"
	write := func(tx *gorm.DB, id string) error {
		if err := tx.Exec(insert, id).Error; err != nil {
			return err
		}
		_, err := outboxgorm.Write(tx, w, envelope(id))
		return err
	}
	return func(ctx context.Context, p string, outerRollback bool) (keep, drop []string, err error) {
		keep = []string{p + "-outer", p + "-nested-ok", p + "-gorm-ok", p + "-after"}
		drop = []string{p + "-nested-fail", p + "-gorm-fail", p + "-sp-fail", p + "-deep-fail"}
		err = outboxgorm.Transaction(ctx, gdb, func(tx *gorm.DB) error {
			if err := write(tx, p+"-outer"); err != nil {
				return err
			}
			// Nested through the adapter: the savepoint rolls back.
			if err := outboxgorm.Transaction(ctx, tx, func(tx *gorm.DB) error {
				if err := write(tx, p+"-nested-fail"); err != nil {
					return err
				}
				// Doubly nested, rolled back with its parent.
				if err := outboxgorm.Transaction(ctx, tx, func(tx *gorm.DB) error { return write(tx, p+"-deep-fail") }); err != nil {
					return err
				}
				return errInjected
			}); !errors.Is(err, errInjected) {
				return fmt.Errorf("nested transaction: %v", err)
			}
			// Nested through the adapter: commits.
			if err := outboxgorm.Transaction(ctx, tx, func(tx *gorm.DB) error { return write(tx, p+"-nested-ok") }); err != nil {
				return err
			}
			// GORM's own nesting, rolled back and committed.
			if err := tx.Transaction(func(tx *gorm.DB) error {
				if err := write(tx, p+"-gorm-fail"); err != nil {
					return err
				}
				return errInjected
			}); !errors.Is(err, errInjected) {
				return fmt.Errorf("gorm nested transaction: %v", err)
			}
			if err := tx.Transaction(func(tx *gorm.DB) error { return write(tx, p+"-gorm-ok") }); err != nil {
				return err
			}
			// An explicit savepoint, rolled back.
			if err := tx.SavePoint("sp1").Error; err != nil {
				return err
			}
			if err := write(tx, p+"-sp-fail"); err != nil {
				return err
			}
			if err := tx.RollbackTo("sp1").Error; err != nil {
				return err
			}
			if err := write(tx, p+"-after"); err != nil {
				return err
			}
			if outerRollback {
				return errInjected
			}
			return nil
		})
		if outerRollback && errors.Is(err, errInjected) {
			return nil, append(keep, drop...), nil
		}
		return keep, drop, err
	}
}

// bunSavepoints runs business transactions through outboxbun.RunInTx, nesting with
// outboxbun.RunInTx.
func (s *scene) bunSavepoints(t *testing.T, w *outbox.Writer) savepointTx {
	var d schema.Dialect
	switch s.be.name {
	case "postgres":
		d = pgdialect.New()
	case "mysql":
		d = mysqldialect.New()
	default:
		d = sqlitedialect.New()
	}
	bdb := bun.NewDB(s.db, d)
	insert := "INSERT INTO " + s.orders + " (id) VALUES (?)"
	write := func(ctx context.Context, tx bun.Tx, id string) error {
		if _, err := tx.ExecContext(ctx, insert, id); err != nil {
			return err
		}
		_, err := outboxbun.Write(ctx, tx, w, envelope(id))
		return err
	}
	return func(ctx context.Context, p string, outerRollback bool) (keep, drop []string, err error) {
		keep = []string{p + "-outer", p + "-nested-ok", p + "-after"}
		drop = []string{p + "-nested-fail", p + "-deep-fail", p + "-panic"}
		err = outboxbun.RunInTx(ctx, bdb, nil, func(ctx context.Context, tx bun.Tx) error {
			if err := write(ctx, tx, p+"-outer"); err != nil {
				return err
			}
			if err := outboxbun.RunInTx(ctx, tx, nil, func(ctx context.Context, tx bun.Tx) error {
				if err := write(ctx, tx, p+"-nested-fail"); err != nil {
					return err
				}
				if err := outboxbun.RunInTx(ctx, tx, nil, func(ctx context.Context, tx bun.Tx) error {
					return write(ctx, tx, p+"-deep-fail")
				}); err != nil {
					return err
				}
				return errInjected
			}); !errors.Is(err, errInjected) {
				return fmt.Errorf("nested RunInTx: %v", err)
			}
			if err := outboxbun.RunInTx(ctx, tx, nil, func(ctx context.Context, tx bun.Tx) error {
				return write(ctx, tx, p+"-nested-ok")
			}); err != nil {
				return err
			}
			// A nested panic rolls its savepoint back.
			func() {
				defer func() { _ = recover() }()
				_ = outboxbun.RunInTx(ctx, tx, nil, func(ctx context.Context, tx bun.Tx) error {
					if err := write(ctx, tx, p+"-panic"); err != nil {
						return err
					}
					panic(errInjected)
				})
			}()
			if err := write(ctx, tx, p+"-after"); err != nil {
				return err
			}
			if outerRollback {
				return errInjected
			}
			return nil
		})
		if outerRollback && errors.Is(err, errInjected) {
			return nil, append(keep, drop...), nil
		}
		return keep, drop, err
	}
}

// TestInprocSavepointRollback: business transactions through the GORM and bun
// adapters, with events written in nested transactions (savepoints) that roll back,
// others that commit, and some outer transactions rolled back as a whole, from several
// goroutines. Events of a rolled-back savepoint are never delivered (phantom = 0) and
// their rows never exist; every other committed event is delivered once.
func TestInprocSavepointRollback(t *testing.T) {
	seed := Seed(t)
	adapters := []struct {
		name string
		txFn func(s *scene, t *testing.T, w *outbox.Writer) savepointTx
	}{
		{"gorm", (*scene).gormSavepoints},
		{"bun", (*scene).bunSavepoints},
	}
	for _, a := range adapters {
		t.Run(a.name, func(t *testing.T) {
			forEachBackend(t, allBackends, func(t *testing.T, be backend) {
				s := newScene(t, "savepoint-rollback/"+a.name, be, seed, sceneOptions{})
				ob := s.start(outbox.Config{PollInterval: 100 * time.Millisecond, SkipRecent: 200 * time.Millisecond}, "node", succeed)
				run := a.txFn(s, t, ob.Writer())
				ctx, cancel := context.WithTimeout(t.Context(), Duration(t, shortLoad))
				defer cancel()
				var wg sync.WaitGroup
				var mu sync.Mutex
				var txErrs []error
				for wi := range 4 {
					wg.Go(func() {
						for n := 0; ctx.Err() == nil; n++ {
							p := fmt.Sprintf("w%d-%05d", wi, n)
							outerRollback := chance(seed, p, "outer") < 0.2
							keep, drop, err := run(context.WithoutCancel(ctx), p, outerRollback)
							if err != nil {
								mu.Lock()
								txErrs = append(txErrs, err)
								mu.Unlock()
								continue
							}
							for _, id := range keep {
								_ = s.log.Append(Record{Kind: Committed, Event: id, Node: "writer"})
							}
							for _, id := range drop {
								_ = s.log.Append(Record{Kind: RolledBack, Event: id, Node: "writer"})
							}
							sleepCtx(ctx, 5*time.Millisecond)
						}
					})
				}
				wg.Wait()
				if len(txErrs) > 0 {
					t.Errorf("%d business transaction(s) failed; first: %v", len(txErrs), txErrs[0])
				}
				s.drain(30 * time.Second)
				rep := s.check(true)
				finals := s.finals()
				for _, r := range s.records() {
					if _, ok := finals[r.Event]; ok && r.Kind == RolledBack {
						t.Errorf("rolled-back event %s has a row", r.Event)
					}
				}
				if rep.RolledBack == 0 || rep.Committed == 0 {
					t.Errorf("%d committed, %d rolled back: the run proved nothing", rep.Committed, rep.RolledBack)
				}
				s.assertNoErrorLogs()
			})
		})
	}
}
