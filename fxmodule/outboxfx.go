package outboxfx

import (
	"database/sql"
	"fmt"
	"log/slog"

	"go.uber.org/fx"

	outbox "github.com/outboxkit/outbox/core"
)

// Config configures the Outbox that [Module] builds. It has exactly the fields of
// [outbox.Config], documented there, with the same defaults; only Dialect is required
// (or Store). It is a type of its own so that fx.Supply(outboxfx.Config{...}) names what
// it is for in the fx graph:
//
//	fx.Supply(outboxfx.Config{Dialect: outbox.Postgres, Workers: 8})
type Config outbox.Config

// Module builds an [outbox.Outbox] and provides it, its writer (*outbox.Writer) and its
// events (*outbox.Events, for inspection and replay). It builds them even when nothing in the app
// depends on them, so adding the module is enough for the outbox to start and stop with
// the app. It also provides the admin handler, [AdminHandler], built by [NewAdmin] when
// something depends on it. Pass it to fx.New (or put it in another fx.Module), not to
// fx.Provide.
//
// The module needs a [Config] and a *sql.DB (unless Config.Store is set) in the app; it
// uses the app's *slog.Logger, if there is one, when Config.Logger is nil, and registers
// every listener provided with [AsListener]. It appends one hook to the fx.Lifecycle:
// OnStart calls [outbox.Outbox.Start], which starts the dispatcher, the poller and the
// purger and returns at once (their loops do not inherit OnStart's deadline); OnStop
// calls [outbox.Outbox.Stop], which stops them in reverse order and drains the
// dispatcher within OnStop's context.
//
// The app fails to build (fx.New's app.Err, and Start) with an error matching
// [outbox.ErrInvalidConfig] (an [*outbox.ConfigError] naming the field) when the
// configuration is invalid, when the *sql.DB is missing or nil and Config.Store is not
// set, or when a listener has no event type or no listener; and with an error wrapping
// [outbox.ErrDuplicateListener], naming the aggregate and event types, when two
// listeners share a route.
var Module = fx.Module("outbox",
	fx.Provide(newOutbox, NewAdmin),
	// The outbox is built by this invocation, not on demand: see "Why only a module" in
	// the package documentation.
	fx.Invoke(runOutbox),
)

// runOutbox makes fx build the Outbox (and so register its lifecycle hook and its
// listeners) even when nothing else depends on it.
func runOutbox(*outbox.Outbox) {}

// params are the dependencies of newOutbox, filled in by fx.
type params struct {
	fx.In

	// Lifecycle receives the Outbox's start and stop hook.
	Lifecycle fx.Lifecycle
	// Config is the configuration supplied with fx.Supply.
	Config Config
	// DB is the database the outbox table lives in. It is optional only so that a
	// missing one gets a clear error (or none when Config.Store is set).
	DB *sql.DB `optional:"true"`
	// Logger, when the app provides one, is used when Config.Logger is nil.
	Logger *slog.Logger `optional:"true"`
	// Listeners are the listeners provided with [AsListener].
	Listeners []Listener `group:"outbox_listeners"`
}

// results are what newOutbox provides to the fx graph.
type results struct {
	fx.Out

	// Outbox is the composite outbox, registered with the app's lifecycle.
	Outbox *outbox.Outbox
	// Writer is Outbox.Writer(), for business code that writes events.
	Writer *outbox.Writer
	// Events is Outbox.Events(), for code that inspects and replays events.
	Events *outbox.Events
}

// newOutbox is the constructor behind [Module]: it builds the Outbox with [outbox.New]
// from p.DB and p.Config, registers p.Listeners and appends the Outbox's start and stop
// hook to p.Lifecycle. It is unexported on purpose: provided on its own, fx would build
// it only when something depends on its results (see the package documentation).
func newOutbox(p params) (results, error) {
	cfg := outbox.Config(p.Config)
	if cfg.Logger == nil {
		cfg.Logger = p.Logger
	}
	if p.DB == nil && cfg.Store == nil {
		return results{}, &outbox.ConfigError{Field: "DB", Reason: "no *sql.DB in the fx app, or it is nil: " +
			"provide one (for example fx.Provide(newDB)), or set Config.Store"}
	}
	ob, err := outbox.New(p.DB, cfg)
	if err != nil {
		return results{}, err
	}
	for _, l := range p.Listeners {
		if err := ob.Subscribe(l); err != nil {
			return results{}, fmt.Errorf("outboxfx: register listener: %w", err)
		}
	}
	p.Lifecycle.Append(fx.Hook{OnStart: ob.Start, OnStop: ob.Stop})
	return results{Outbox: ob, Writer: ob.Writer(), Events: ob.Events()}, nil
}
