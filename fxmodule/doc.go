// Package outboxfx wires the transactional outbox into an uber-go/fx application: add
// [Module] to fx.New and the Outbox's dispatcher, poller and purger start with the app
// and drain when it stops.
//
// Import path: github.com/outboxkit/outbox/fxmodule (package outboxfx). It holds wiring
// only; everything it builds comes from package outbox
// (github.com/outboxkit/outbox/core).
//
// # Wiring
//
// Supply a [Config] and a *sql.DB, add [Module], and provide listeners with
// [AsListener]:
//
//	fx.New(
//		fx.Supply(outboxfx.Config{Dialect: outbox.Postgres}),
//		outboxfx.Module,
//		fx.Provide(newDB), // returns *sql.DB
//		fx.Provide(outboxfx.AsListener(NewOrderPlacedListener)),
//	).Run()
//
// Module is an fx.Option, so it goes to fx.New (or into another fx.Module), not to
// fx.Provide: fx.New fails on fx.Provide(outboxfx.Module) with "fx.Option should be
// passed to fx.New directly, not to fx.Provide". It provides *outbox.Outbox,
// *outbox.Writer and *outbox.Events, and it always builds them, even when nothing in
// the app depends on them, so the outbox runs as soon as the module is added.
//
// # Why only a module
//
// The package exports no constructor of the Outbox for fx.Provide, on purpose. fx runs a
// constructor only when something depends on one of its results, and listeners provided
// with [AsListener] are no such dependency: fx builds a value group only for a
// constructor it is already building. Provided on its own, the constructor would build
// the Outbox only if something took its *outbox.Writer (or the Outbox, or its
// *outbox.Events). An app that registers listeners but writes its events elsewhere (another
// service, a WriterOnly outbox, a migration) would start without a dispatcher or a
// poller, and its events would stay NEW forever, with no error anywhere.
//
// Keeping such a constructor and failing at start when it is used without the module
// cannot work: a check runs only in code that fx runs, and in that wiring fx runs
// nothing of this package, not the constructor, not even the listener constructors. So
// [Module] is the only way in, and the wiring fx accepts is the one that always starts:
// the module's fx.Invoke builds the Outbox at fx.New, which registers its listeners and
// its lifecycle hook, and a configuration error makes fx.New fail.
//
// # Listeners
//
// A listener constructor returns a [Listener] (or a []Listener, for one type that
// handles several routes), wrapped by [AsListener] so that fx collects it into the
// value group "outbox_listeners" (an fx.Out field with the tag
// `group:"outbox_listeners"` works too):
//
//	func NewOrderPlacedListener(pub *Publisher) outboxfx.Listener {
//		return outboxfx.Listener{AggregateType: "Order", EventType: "OrderPlaced", Listener: pub}
//	}
//
//	fx.Provide(outboxfx.AsListener(NewOrderPlacedListener))
//
// Two listeners for the same (aggregate type, event type) make fx.New fail with an
// error that wraps [outbox.ErrDuplicateListener] and names both types.
//
// # Lifecycle
//
// [Module] appends one hook to the fx.Lifecycle. OnStart calls [outbox.Outbox.Start]: it
// checks the connection and the table, then starts the dispatcher, the poller and the
// purger, in that order, and returns at once. OnStart's context bounds that start-up
// only (fx gives it 15 seconds by default): the run loops keep its values but not its
// deadline, so they run until the app stops. OnStop calls [outbox.Outbox.Stop]: the
// purger and the poller stop, then the dispatcher delivers the events it has queued,
// within the context fx gives OnStop (15 seconds by default, see fx.StopTimeout).
// When that deadline passes, the Outbox cancels the running deliveries and returns
// without waiting for their listeners (it never waits for stuck ones, see
// [outbox.Outbox.Stop]); the events it did not deliver stay in the table and are
// delivered after the next start. Events written before the app started are found by
// the poller.
//
// fx stops hooks in the reverse order of their constructors, and the module's
// constructor depends on the *sql.DB, so a DB constructor that closes the DB in its own
// OnStop hook closes it after the outbox has drained.
//
// # Errors
//
// A missing or nil *sql.DB (unless [outbox.Config.Store] is set), an invalid
// configuration and a bad listener make fx.New fail: [fx.App.Err] and [fx.App.Start]
// return an error that names the problem and matches [outbox.ErrInvalidConfig] or
// [outbox.ErrDuplicateListener]. A database that cannot be reached, or a table that
// does not exist, makes the app's Start fail. The module does not create the table:
// run [outbox.Migrate] or your migration tool first, for example in the constructor
// that opens the *sql.DB.
package outboxfx
