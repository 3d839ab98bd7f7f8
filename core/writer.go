package outbox

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outboxkit/outbox/core/adapterkit"
	"github.com/outboxkit/outbox/core/internal/crash"
	"github.com/outboxkit/outbox/core/internal/dispatch"
	"github.com/outboxkit/outbox/core/internal/ids"
	"github.com/outboxkit/outbox/core/internal/order"
	"github.com/outboxkit/outbox/core/storage"
)

// WriterConfig configures a [Writer]. The zero value is ready to use.
type writerConfig struct {
	// MaxPayloadBytes bounds an encoded payload. Defaults to DefaultMaxPayloadBytes (1 MiB).
	MaxPayloadBytes int
	// Codec encodes payloads that are not JSON text already. Defaults to JSONCodec.
	Codec Codec
	// Hooks run around every write, in order (see [WriterHook]). The composite [Outbox]
	// appends the dispatcher's hook that feeds the hot path. Defaults to none.
	Hooks []WriterHook
	// Logger receives hook failures and debug notes. Defaults to slog.Default().
	Logger *slog.Logger
	// Now is the clock used for events written without OccurredAt. Defaults to time.Now.
	Now func() time.Time
	// ClaimTTL, when positive, makes the writer insert the events that the hot path will
	// deliver already claimed ([MultiNode]): events that are due at write time, written
	// through a transaction that runs after-commit hooks, are inserted with a fresh claim
	// token of NodeID (one per batch) in locked_by and locked_until set to the database's
	// current time plus ClaimTTL, so that no other node's claiming poller takes them
	// while this node delivers them. Set it only when a [Dispatcher.WriterHook] is among
	// Hooks: a claimed event nobody delivers waits for its claim to expire. While the
	// dispatcher's hot queue is full, batches are not pre-claimed (the hot path would
	// drop them): any node's poller claims them. Defaults to 0, no claims.
	ClaimTTL time.Duration
	// NodeID owns the claims of ClaimTTL; see ids.ValidateNodeID. Defaults to a
	// fresh one.
	NodeID string
	// hot is the hot path's queue that pre-claims are made for: while it is full the
	// writer makes none. Nil when the writer feeds no hot path.
	hot *dispatch.Queues
	// OrderByAggregate orders the events with an AggregateID by their aggregate.
	OrderByAggregate bool
	// orders moves the keys of ordered events on after commit; nil when the store
	// keeps no order (ordered writes are then rejected).
	orders *order.Orderer
}

// Writer writes in the caller's transaction. It is safe for concurrent use.
type Writer struct {
	store       storage.Store
	hooks       []WriterHook
	maxPayload  int
	codec       Codec
	logger      *slog.Logger
	now         func() time.Time
	claimTTL    time.Duration
	nodeID      string
	hot         *dispatch.Queues // see WriterConfig.hot
	byAggregate bool
	orders      *order.Orderer
	noHooksOnce sync.Once
	unorderOnce sync.Once
	// speedup names what delivers committed events sooner than the poller, when a
	// transaction runs after-commit hooks: "hot path", "notifier", or "" when nothing
	// does. A write that misses it is warned about (warnSlowWrite).
	speedup string
	// slowLogged is when warnSlowWrite last logged (UnixNano; 0 before the first line),
	// slowSkipped the writes it warned about without logging since.
	slowLogged  atomic.Int64
	slowSkipped atomic.Int64
}

// slowWriteLogInterval is the least time between two lines of [Writer.warnSlowWrite].
const slowWriteLogInterval = time.Minute

// NewWriter returns a writer that inserts through store. It returns a [*ConfigError] for
// a nil store, a negative MaxPayloadBytes or ClaimTTL, or an invalid NodeID.
func newWriter(store storage.Store, cfg writerConfig) (*Writer, error) {
	if store == nil {
		return nil, &ConfigError{Field: "Store", Reason: "is nil"}
	}
	if cfg.MaxPayloadBytes < 0 {
		return nil, &ConfigError{Field: "MaxPayloadBytes", Reason: "must not be negative"}
	}
	if cfg.ClaimTTL < 0 {
		return nil, &ConfigError{Field: "ClaimTTL", Reason: "must not be negative"}
	}
	if cfg.NodeID != "" {
		if err := ids.ValidateNodeID(cfg.NodeID); err != nil {
			return nil, err
		}
	}
	for i, h := range cfg.Hooks {
		if h == nil {
			return nil, &ConfigError{Field: "WriterHooks", Reason: fmt.Sprintf("hook %d is nil", i)}
		}
	}
	logger := cmp.Or(cfg.Logger, slog.Default())
	w := &Writer{
		store:       store,
		hooks:       append([]WriterHook(nil), cfg.Hooks...),
		maxPayload:  cmp.Or(cfg.MaxPayloadBytes, DefaultMaxPayloadBytes),
		codec:       cfg.Codec,
		logger:      logger.With(slog.String("component", "writer")),
		now:         cfg.Now,
		claimTTL:    cfg.ClaimTTL,
		nodeID:      cfg.NodeID,
		hot:         cfg.hot,
		byAggregate: cfg.OrderByAggregate,
		orders:      cfg.orders,
	}
	if w.claimTTL > 0 && w.nodeID == "" {
		w.nodeID = ids.DefaultNodeID()
	}
	if w.now == nil {
		w.now = time.Now
	}
	switch {
	case w.hot != nil && w.hot.HotEnabled():
		w.speedup = "hot path"
	case slices.ContainsFunc(w.hooks, func(h WriterHook) bool { _, ok := h.(notifyHook); return ok }):
		w.speedup = "notifier"
	}
	return w, nil
}

// Write is [Writer.WriteAll] of one envelope; "" means a hook suppressed it.
func (w *Writer) Write(ctx context.Context, tx Executor, env Envelope) (string, error) {
	ids, err := w.WriteAll(ctx, tx, []Envelope{env})
	if err != nil || len(ids) == 0 {
		return "", err
	}
	return ids[0], nil
}

// WriteAll writes a batch of events with one INSERT in the transaction tx and returns
// their IDs in order (none when a hook suppressed the batch). Through a [*Tx] or an
// adapter's transaction the events take the hot path after commit; through a bare
// *sql.Tx the poller delivers them (docs/how-it-works.md). An envelope whose ID is an
// event already is a no-op that returns its ID. It returns ErrNoTransaction, ErrTxDone,
// an [*EnvelopeError], a hook's BeforeWrite error or the INSERT's, and then inserts
// nothing; no SQL runs before validation passes.
func (w *Writer) WriteAll(ctx context.Context, tx Executor, envs []Envelope) ([]string, error) {
	written, err := w.WriteAllReport(ctx, tx, envs)
	if err != nil || len(written) == 0 {
		return nil, err
	}
	ids := make([]string, len(written))
	for i := range written {
		ids[i] = written[i].ID
	}
	return ids, nil
}

// Written is an envelope's event ID and whether that event existed already.
type Written struct {
	ID      string
	Existed bool
}

// WriteAllReport is [Writer.WriteAll] reporting which events existed already.
func (w *Writer) WriteAllReport(ctx context.Context, tx Executor, envs []Envelope) ([]Written, error) {
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
	newIDs := generatesIDs(envs) // every ID is the writer's: no row can hold one
	events, err := encodeEnvelopes(envs, w.now(), w.maxPayload, w.codec, newIDs)
	if err != nil {
		return nil, err
	}
	keys, err := w.orderKeys(events)
	if err != nil {
		return nil, err
	}
	var claimTTL time.Duration
	if w.claimTTL > 0 && hooks != nil && (w.hot == nil || !w.hot.HotFull()) {
		claimTTL = w.preClaim(events)
	}
	res, err := w.store.Insert(ctx, tx, storage.InsertParams{Events: events, ClaimTTL: claimTTL, NewIDs: newIDs})
	if err != nil {
		if errors.Is(err, sql.ErrTxDone) {
			return nil, fmt.Errorf("outbox: write: %w (%w)", ErrTxDone, err)
		}
		return nil, fmt.Errorf("outbox: write: %w", err)
	}
	crash.Point("after-insert")
	written := make([]Written, len(events))
	for i := range events {
		written[i].ID = events[i].ID
	}
	if len(res.Existing) > 0 {
		existed := make(map[string]bool, len(res.Existing))
		for _, id := range res.Existing {
			existed[id] = true
		}
		for i := range written {
			written[i].Existed = existed[written[i].ID]
		}
		events = slices.DeleteFunc(events, func(e Event) bool { return existed[e.ID] })
		if len(events) == 0 {
			return written, nil
		}
		if keys != nil {
			keys = dispatch.EventKeys(events)
		}
	}
	w.runHooks(ctx, "AfterWrite", events, WriterHook.AfterWrite)
	if hooks == nil && w.speedup != "" {
		w.warnSlowWrite(ctx, tx)
	}
	if keys != nil {
		if hooks == nil {
			if w.speedup == "" { // else warned above
				w.unorderOnce.Do(func() {
					w.logger.InfoContext(ctx, "transaction has no after-commit hooks; its ordered events wait for the poller's sweep (once per writer)",
						slog.String("executor", fmt.Sprintf("%T", tx)))
				})
			}
		} else if busy := dispatch.WaitingKeys(events, keys); busy != nil {
			// These keys had events before this write: once it is visible, promote
			// the key's next event, which may be one of these by then.
			hookCtx := context.WithoutCancel(ctx)
			hooks.AfterCommit(func() {
				var keys []string
				for _, k := range dispatch.EventKeys(events) { // in write order
					if busy[k] {
						keys = append(keys, k)
					}
				}
				w.orders.AfterCommit(hookCtx, slices.DeleteFunc(slices.Clone(events), func(e Event) bool {
					return !busy[e.OrderKey]
				}), keys)
			})
		}
	}
	if len(w.hooks) > 0 {
		if hooks == nil {
			if w.speedup == "" { // else warned above
				w.noHooksOnce.Do(func() {
					w.logger.InfoContext(ctx, "transaction has no after-commit hooks; its events are delivered by the poller (once per writer)",
						slog.String("executor", fmt.Sprintf("%T", tx)))
				})
			}
		} else {
			hookCtx := context.WithoutCancel(ctx)
			// The hot path's copies of these events are read now: until the hooks have
			// run, an event another path delivers first leaves a tombstone that refuses
			// the hot copy (see Queues.BeginRead).
			endRead := func() {}
			if w.hot != nil && w.hot.HotEnabled() {
				_, endRead = w.hot.BeginRead()
			}
			hooks.AfterCommit(func() {
				defer endRead()
				w.runHooks(hookCtx, "AfterCommit", events, WriterHook.AfterCommit)
			})
			hooks.AfterRollback(func() {
				defer endRead()
				w.runHooks(hookCtx, "AfterRollback", events, WriterHook.AfterRollback)
			})
		}
	}
	return written, nil
}

// warnSlowWrite logs that a write through tx, a transaction without after-commit
// hooks, missed w.speedup: at once the first time, then at most once per
// slowWriteLogInterval, with the count of the writes it did not log in between.
func (w *Writer) warnSlowWrite(ctx context.Context, tx Executor) {
	now := time.Now().UnixNano()
	last := w.slowLogged.Load()
	if last != 0 && now-last < int64(slowWriteLogInterval) || !w.slowLogged.CompareAndSwap(last, now) {
		w.slowSkipped.Add(1)
		return
	}
	w.logger.LogAttrs(ctx, slog.LevelWarn, "transaction has no after-commit hooks: its events miss the "+w.speedup+
		" and wait for the poller; write through outbox.RunInTx, outbox.BeginTx or an adapter's transaction "+
		"(outboxgorm.Transaction, outboxbun.RunInTx, outboxsqlx.RunInTx)",
		slog.String("executor", fmt.Sprintf("%T", tx)), slog.String("caller", callerOutside()),
		slog.Int64("writes_not_logged", w.slowSkipped.Swap(0)))
}

// callerOutside returns "file:line" of the first caller outside this package and the
// adapters, which call the writer for their own callers; "" when there is none.
func callerOutside() string {
	var pcs [32]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs[:])])
	for {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, "github.com/outboxkit/outbox/core.") &&
			!strings.HasPrefix(f.Function, "github.com/outboxkit/outbox/adapters/") {
			return fmt.Sprintf("%s:%d", f.File, f.Line)
		}
		if !more {
			return ""
		}
	}
}

// orderKeys gives the events their order keys (Config.OrderByAggregate), marks the
// ordered ones WAITING, as the store inserts them, and returns their distinct keys, nil
// when none is ordered.
func (w *Writer) orderKeys(events []Event) ([]string, error) {
	if w.byAggregate {
		for i := range events {
			if e := &events[i]; e.OrderKey == "" && e.AggregateID != "" {
				e.OrderKey = e.AggregateType + ":" + e.AggregateID
			}
		}
	}
	keys := dispatch.EventKeys(events)
	if keys == nil {
		return nil, nil
	}
	if w.orders == nil {
		return nil, fmt.Errorf("outbox: write: ordered events need a store that implements OrderStore: %w", errors.ErrUnsupported)
	}
	return keys, nil
}

// preClaim gives the events that are due now one fresh claim token, so that Insert
// stores them claimed, and returns the claim TTL (0 when no event is due). Each event's
// LockedUntil becomes this process's estimate of the claim's end: the database starts
// the claim at the INSERT, after this moment, so the estimate is never late. It carries
// a monotonic clock reading, which the dispatcher compares with time.Now.
func (w *Writer) preClaim(events []Event) time.Duration {
	now := w.now()
	start := time.Now()
	token := ""
	for i := range events {
		if events[i].AvailableAt.After(now) {
			continue // delayed: the poller claims it when it is due
		}
		if token == "" {
			token = ids.NewClaimToken(w.nodeID)
		}
		events[i].LockedBy, events[i].LockedUntil = token, start.Add(w.claimTTL)
	}
	if token == "" {
		return 0
	}
	return w.claimTTL
}

// transactionOf reports whether exec is inside a transaction and, when it can run
// callbacks at the transaction's end, returns them.
func transactionOf(exec Executor) (adapterkit.Registrar, bool) {
	switch e := exec.(type) {
	case nil:
		return nil, false
	case adapterkit.Registrar:
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
