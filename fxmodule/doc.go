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
// fx.Provide: fx rejects options passed to fx.Provide. It provides *outbox.Outbox,
// *outbox.Writer and *outbox.DeadEvents, and it always builds them, even when nothing in
// the app depends on them, so the outbox runs as soon as the module is added.
//
// [New] is the same constructor for fx.Provide(outboxfx.New). Like every fx
// constructor it runs only when something depends on one of its results (typically
// the code that takes the *outbox.Writer); [Module] adds that dependency itself.
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
// [New] appends one hook to the fx.Lifecycle. OnStart calls [outbox.Outbox.Start]: it
// checks the connection and the table, then starts the dispatcher, the poller and the
// purger, in that order, and returns at once. OnStart's context bounds that start-up
// only (fx gives it 15 seconds by default): the run loops keep its values but not its
// deadline, so they run until the app stops. OnStop calls [outbox.Outbox.Stop]: the
// purger and the poller stop, then the dispatcher delivers the events it has queued,
// within the context fx gives OnStop (15 seconds by default, see fx.StopTimeout).
// When that deadline passes, fx's Stop returns at once while the Outbox cancels the
// running deliveries and waits for them to return; the events it did not deliver stay
// in the table and are delivered after the next start. Events written before the app
// started are found by the poller.
//
// fx stops hooks in the reverse order of their constructors, and [New] depends on the
// *sql.DB, so a DB constructor that closes the DB in its own OnStop hook closes it
// after the outbox has drained.
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
