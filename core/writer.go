package outbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"
)

// WriterConfig configures a [Writer]. The zero value is ready to use.
type WriterConfig struct {
	// MaxPayloadBytes bounds an encoded payload. Defaults to DefaultMaxPayloadBytes (1 MiB).
	MaxPayloadBytes int
	// Hooks run around every write, in order (see [WriterHook]). The composite [Outbox]
	// appends the dispatcher's hook that feeds the hot path. Defaults to none.
	Hooks []WriterHook
	// Logger receives hook failures and debug notes. Defaults to slog.Default().
	Logger *slog.Logger
	// Now is the clock used for events written without OccurredAt. Defaults to time.Now.
	Now func() time.Time
}

// Writer inserts events into the outbox table inside the caller's transaction. It is safe
// for concurrent use.
type Writer struct {
	store       Store
	hooks       []WriterHook
	maxPayload  int
	logger      *slog.Logger
	now         func() time.Time
	noHooksOnce sync.Once
}

// NewWriter returns a writer that inserts through store. It returns a [*ConfigError] for
// a nil store or a negative MaxPayloadBytes.
func NewWriter(store Store, cfg WriterConfig) (*Writer, error) {
	if store == nil {
		return nil, &ConfigError{Field: "Store", Reason: "is nil"}
	}
	if cfg.MaxPayloadBytes < 0 {
		return nil, &ConfigError{Field: "MaxPayloadBytes", Reason: "must not be negative"}
	}
	for i, h := range cfg.Hooks {
		if h == nil {
			return nil, &ConfigError{Field: "WriterHooks", Reason: fmt.Sprintf("hook %d is nil", i)}
		}
	}
	logger := cmp.Or(cfg.Logger, slog.Default())
	w := &Writer{
		store:      store,
		hooks:      append([]WriterHook(nil), cfg.Hooks...),
		maxPayload: cmp.Or(cfg.MaxPayloadBytes, DefaultMaxPayloadBytes),
		logger:     logger.With(slog.String("component", "writer")),
		now:        cfg.Now,
	}
	if w.now == nil {
		w.now = time.Now
	}
	return w, nil
}

// Write writes one event in the transaction tx and returns its ID, or "" when a
// [WriterHook] suppressed the write. See [Writer.WriteAll] for the rules and errors.
func (w *Writer) Write(ctx context.Context, tx Executor, env Envelope) (string, error) {
	ids, err := w.WriteAll(ctx, tx, []Envelope{env})
	if err != nil || len(ids) == 0 {
		return "", err
	}
	return ids[0], nil
}

// WriteAll writes a batch of events with one INSERT in the transaction tx and returns
// their IDs in order (none when a hook suppressed the batch).
//
// tx must be inside a transaction: a [*Tx] from [RunInTx] or [BeginTx], an adapter's
// transaction, or any executor with Commit and Rollback methods such as *sql.Tx. With a
// *Tx or an adapter's transaction, committed events are handed to the dispatcher at once
// (the hot path); through a bare *sql.Tx they are committed just the same and the poller
// delivers them.
//
// Errors: ErrNoTransaction when tx is not in a transaction (for example a *sql.DB); an
// [*EnvelopeError] (matching ErrInvalidEnvelope) for an invalid envelope; the error of a
// hook's BeforeWrite; or the INSERT's error. In every error case nothing is inserted by
// this call, and no SQL runs before validation passes.
func (w *Writer) WriteAll(ctx context.Context, tx Executor, envs []Envelope) ([]string, error) {
	hooks, ok := transactionOf(tx)
	if !ok {
		return nil, ErrNoTransaction
	}
	if len(envs) == 0 {
		return nil, nil
	}
	envs, err := w.beforeWrite(ctx, envs)
	if err != nil || len(envs) == 0 {
		return nil, err
	}
	events, err := encodeEnvelopes(envs, w.now(), w.maxPayload)
	if err != nil {
		return nil, err
	}
	if err := w.store.Insert(ctx, tx, events); err != nil {
		return nil, fmt.Errorf("outbox: write: %w", err)
	}
	w.runHooks(ctx, "AfterWrite", events, WriterHook.AfterWrite)
	ids := make([]string, len(events))
	for i := range events {
		ids[i] = events[i].ID
	}
	if len(w.hooks) > 0 {
		if hooks == nil {
			w.noHooksOnce.Do(func() {
				w.logger.DebugContext(ctx, "transaction has no after-commit hooks; its events are delivered by the poller",
					slog.String("executor", fmt.Sprintf("%T", tx)))
			})
		} else {
			hookCtx := context.WithoutCancel(ctx)
			hooks.AfterCommit(func() { w.runHooks(hookCtx, "AfterCommit", events, WriterHook.AfterCommit) })
			hooks.AfterRollback(func() { w.runHooks(hookCtx, "AfterRollback", events, WriterHook.AfterRollback) })
		}
	}
	return ids, nil
}

// transactionOf reports whether exec is inside a transaction and, when it can run
// callbacks at the transaction's end, returns them.
func transactionOf(exec Executor) (TxHooks, bool) {
	switch e := exec.(type) {
	case nil:
		return nil, false
	case TxHooks:
		return e, true
	case interface {
		Commit() error
		Rollback() error
	}:
		return nil, true
	}
	return nil, false
}

func (w *Writer) beforeWrite(ctx context.Context, envs []Envelope) (out []Envelope, err error) {
	out = envs
	for _, h := range w.hooks {
		func() {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("outbox: writer hook %T BeforeWrite: %w", h, &PanicError{Value: r, Stack: debug.Stack()})
				}
			}()
			out, err = h.BeforeWrite(ctx, out)
			if err != nil {
				err = fmt.Errorf("outbox: writer hook %T BeforeWrite: %w", h, err)
			}
		}()
		if err != nil || len(out) == 0 {
			return nil, err
		}
	}
	return out, nil
}

// runHooks calls one hook method on every hook; failures are logged, never returned.
func (w *Writer) runHooks(ctx context.Context, name string, events []Event, call func(WriterHook, context.Context, []Event) error) {
	for _, h := range w.hooks {
		func() {
			defer func() {
				if r := recover(); r != nil {
					w.logger.LogAttrs(ctx, slog.LevelError, "writer hook panicked",
						slog.String("hook", fmt.Sprintf("%T", h)), slog.String("method", name),
						slog.Any("panic", r), slog.String("stack", string(debug.Stack())))
				}
			}()
			if err := call(h, ctx, events); err != nil && !errors.Is(err, context.Canceled) {
				w.logger.LogAttrs(ctx, slog.LevelError, "writer hook failed",
					slog.String("hook", fmt.Sprintf("%T", h)), slog.String("method", name), slog.Any("error", err))
			}
		}()
	}
}
