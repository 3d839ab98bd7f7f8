package outboxbun

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/uptrace/bun"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/adapterkit"
)

// state is what RunInTx puts in fn's context: the callbacks of the outermost
// transaction (nil when this level runs without hooks) and the bun.Tx RunInTx began at
// this level. Only writes through that exact bun.Tx value register callbacks.
type state struct {
	cb *adapterkit.Callbacks
	tx bun.Tx
}

type stateKey struct{}

// withoutHooks returns ctx with any state of an enclosing RunInTx hidden. RunInTx begins
// transactions and savepoints with it, because bun keeps that context in the bun.Tx and
// hands it to the fn of its own tx.RunInTx: writes made there must not take the hot path.
func withoutHooks(ctx context.Context) context.Context {
	return context.WithValue(ctx, stateKey{}, (*state)(nil))
}

// callbacksFor returns the callbacks that writes through tx must register with, or nil
// when tx is not the transaction the RunInTx behind ctx began at its level.
func callbacksFor(ctx context.Context, tx bun.Tx) *adapterkit.Callbacks {
	st, _ := ctx.Value(stateKey{}).(*state)
	if st == nil || st.cb == nil || !sameTx(st.tx, tx) {
		return nil
	}
	return st.cb
}

// sameTx reports whether a and b are the same bun.Tx value. A savepoint that bun makes
// has the same *sql.Tx as its parent but another name, so it differs. The comparison
// includes the context bun keeps in the Tx; a query hook could have replaced it with a
// value whose type is not comparable, and == then panics: such a transaction is treated
// as unknown, and its events go to the poller.
func sameTx(a, b bun.Tx) (same bool) {
	if a.Tx == nil || a.Tx != b.Tx {
		return false
	}
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

// level says how one RunInTx relates to the outbox callbacks.
type level struct {
	cb    *adapterkit.Callbacks // nil: no hooks at this level
	mark  int                   // cb's savepoint mark, for a nested level
	outer bool                  // this level began the transaction and owns cb
}

// levelOf classifies db. *bun.DB and bun.Conn begin a transaction; the bun.Tx of an
// enclosing RunInTx (per ctx) begins a savepoint that shares its callbacks; any other
// bun.Tx or bun.IDB, whose BeginTx may start a savepoint this package cannot observe,
// runs without hooks.
func levelOf(ctx context.Context, db bun.IDB) (bun.IDB, level, error) {
	switch d := db.(type) {
	case nil:
		return nil, level{}, fmt.Errorf("%w: nil bun.IDB", outbox.ErrInvalidArgument)
	case *bun.DB:
		if d == nil {
			return nil, level{}, fmt.Errorf("%w: nil *bun.DB", outbox.ErrInvalidArgument)
		}
		return d, level{cb: new(adapterkit.Callbacks), outer: true}, nil
	case *bun.Conn:
		if d == nil {
			return nil, level{}, fmt.Errorf("%w: nil *bun.Conn", outbox.ErrInvalidArgument)
		}
		return levelOf(ctx, *d)
	case bun.Conn:
		if d.Conn == nil {
			return nil, level{}, fmt.Errorf("%w: zero bun.Conn", outbox.ErrInvalidArgument)
		}
		return d, level{cb: new(adapterkit.Callbacks), outer: true}, nil
	case *bun.Tx:
		if d == nil {
			return nil, level{}, fmt.Errorf("%w: nil *bun.Tx", outbox.ErrInvalidArgument)
		}
		return levelOf(ctx, *d)
	case bun.Tx:
		if d.Tx == nil {
			return nil, level{}, fmt.Errorf("%w: zero bun.Tx", outbox.ErrInvalidArgument)
		}
		if cb := callbacksFor(ctx, d); cb != nil {
			return d, level{cb: cb, mark: cb.Savepoint()}, nil
		}
		return d, level{}, nil
	default:
		return d, level{}, nil
	}
}

func (l level) committed() {
	if l.outer {
		l.cb.Committed()
	}
}

func (l level) rolledBack() {
	switch {
	case l.cb == nil:
	case l.outer:
		l.cb.RolledBack()
	default:
		l.cb.RollbackTo(l.mark)
	}
}

// RunInTx runs fn in a transaction on db, begun with opts, and commits it when fn
// returns nil. When fn returns an error or panics, it rolls back and returns fn's error
// or re-raises the panic. fn must not commit or roll back tx itself. It is
// db.RunInTx(ctx, opts, fn) with the outbox's callbacks wired in, and takes its
// arguments in the order bun's method does.
//
// db is usually a *bun.DB or a bun.Conn. Events written with [Write] or [WriteAll]
// through fn's ctx and tx are handed to the dispatcher after the outermost commit
// succeeds, and never after a rollback or a failed commit.
//
// Given the tx of an enclosing RunInTx, and the context that RunInTx passed to its fn,
// RunInTx makes a savepoint instead (opts is ignored) and releases it when fn returns
// nil. When fn fails or panics, the savepoint is rolled back and the events written
// inside it are forgotten, as they are when the release fails; the enclosing
// transaction's own events are still dispatched after the outermost commit.
//
// Any other bun.Tx (begun by bun itself, or passed without the context of the RunInTx
// that began it) gets a savepoint without hooks, and any
// other bun.IDB has its BeginTx called without hooks: events written inside are
// committed with the transaction and delivered by the poller.
//
// Errors: fn's error; a wrapped error of bun's BeginTx or Commit (for a savepoint, of
// SAVEPOINT or RELEASE SAVEPOINT); or an error matching [outbox.ErrInvalidArgument] for
// a nil fn, a nil db or a zero bun.Tx or bun.Conn.
func RunInTx(ctx context.Context, db bun.IDB, opts *sql.TxOptions, fn func(ctx context.Context, tx bun.Tx) error) error {
	if fn == nil {
		return fmt.Errorf("%w: nil fn", outbox.ErrInvalidArgument)
	}
	db, lvl, err := levelOf(ctx, db)
	if err != nil {
		return err
	}
	tx, err := db.BeginTx(withoutHooks(ctx), opts)
	if err != nil {
		return fmt.Errorf("begin: %w", err) // for a bun.Tx: SAVEPOINT
	}
	var st *state
	if lvl.cb != nil {
		st = &state{cb: lvl.cb, tx: tx}
	}
	done := false
	defer func() {
		if !done {
			// After fn's error or panic; fn's error matters more than the rollback's.
			_ = tx.Rollback()
			lvl.rolledBack()
		}
	}()
	if err := fn(context.WithValue(ctx, stateKey{}, st), tx); err != nil {
		return err
	}
	done = true
	if err := tx.Commit(); err != nil {
		lvl.rolledBack()
		return fmt.Errorf("commit: %w", err) // for a bun.Tx: RELEASE SAVEPOINT
	}
	lvl.committed()
	return nil
}
