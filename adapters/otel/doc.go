// Package outboxotel traces the outbox's events with OpenTelemetry, from the request
// that writes an event to its delivery and on through a broker, and records the
// outbox's metrics through an OpenTelemetry meter.
//
// Import it as
//
//	import outboxotel "github.com/outboxkit/outbox/adapters/otel"
//
// The package is named outboxotel so that it never shadows go.opentelemetry.io/otel.
//
// # Wiring
//
// Every function takes a [Config]; its zero value uses the OpenTelemetry globals. Build
// one and give the outbox the hook, the interceptor and, if you want them, the metrics:
//
//	cfg := outboxotel.Config{TracerProvider: tp, Propagator: prop, MeterProvider: mp}
//	metrics, err := outboxotel.NewMetrics(cfg)
//	...
//	ob, err := outbox.New(db, outbox.Config{
//		Dialect:      outbox.Postgres,
//		WriterHooks:  []outbox.WriterHook{outboxotel.WriterHook(cfg)},
//		Interceptors: []outbox.Interceptor{outboxotel.Interceptor(cfg)}, // first
//		Metrics:      metrics,
//	})
//
// A broker relay (the Kafka and NATS relays of this project) takes [Propagate] in its
// Propagate field, so that its messages carry the delivery's trace:
//
//	Propagate: outboxotel.Propagate(cfg),
//
// The global propagator does nothing until otel.SetTextMapPropagator is called: without
// it, or [Config.Propagator], no header is written and every delivery starts a trace of
// its own.
//
// # The span tree
//
// [WriterHook] writes the trace context of the write's ctx (the request's span) into
// the event's Headers (traceparent and tracestate with the W3C propagator), in the same
// transaction as the event. [Interceptor] reads it back when the event is delivered and
// wraps every attempt in a span, whichever process delivers it and however late:
//
//	POST /orders                        the request that wrote the event (its server span)
//	└── outbox deliver OrderPlaced      consumer span, one per delivery attempt
//	    ├── (the listener's spans)
//	    └── (the broker consumer's)     a relay's message carries the delivery span's context
//
// A retried event gets one delivery span per attempt, all children of the request span.
// The span's name is "outbox deliver " and the event type. (The messaging semantic
// conventions name a span after its operation and destination; an event type is no
// destination, and the prefix makes the outbox's spans easy to find.)
//
// # Attributes of a delivery span
//
//	messaging.system          "outbox"
//	messaging.operation       "process" (the older convention's name)
//	messaging.operation.type  "process"
//	messaging.message.id      the event ID
//	outbox.event.id           the event ID
//	outbox.event.type         the event type
//	outbox.aggregate.type     the aggregate type (outbox.GlobalAggregateType when none was written)
//	outbox.aggregate.id       the aggregate ID, when set
//	outbox.tenant.id          the tenant ID, when set
//	outbox.order_key          the order key, when set
//	outbox.attempt            this attempt's number, from 1: failed attempts before it + 1 (a deferral does not count)
//	outbox.instance           [Config.Instance], when set
//	outbox.outcome            "done", "deferred" or "failure", set when the attempt ends
//
// A failed attempt also records its error as an exception event and has the status
// Error. The outcome is the error the interceptors see: nil is done, the error of
// [outbox.Defer] deferred (no failure: no attempt counted), any other error, [outbox.Dead]'s
// included, failure; the metrics' outbox.outcome says whether a failure was retry, dead
// or fallback.
//
// # Child or link
//
// By default a delivery span is a child of the writer's span: the trace of a request
// shows what its events did, however much later, and most tracing backends show it as
// one tree. A request that writes many events, or deliveries retried for hours, make
// large traces that grow long after the request ended; with [Config.LinkToWriter] each
// delivery span starts a trace of its own, with a link to the writer's span (the
// messaging conventions' choice for batch consumers). An event written without a span
// (by a job outside any trace, or before tracing was set up) gets a root span either
// way.
//
// # Metrics
//
// [NewMetrics] implements [outbox.Metrics] with the instruments below, the same
// measurements as the Prometheus adapter's (github.com/outboxkit/outbox/adapters/prometheus)
// under OpenTelemetry names. Every measurement also carries outbox.instance when
// [Config.Instance] is set.
//
//	outbox.hot.enqueued          counter         {event}    committed events handed to the hot queue
//	outbox.hot.dropped           counter         {event}    committed events the full (or stopped) hot queue refused; the poller delivers them
//	outbox.hot.delayed_skipped   counter         {event}    committed events that skipped the hot queue because they are delayed
//	outbox.cold.enqueued         counter         {event}    pending events the poller handed to the cold queue
//	outbox.dispatch.attempts     counter         {attempt}  finished delivery attempts {outbox.path, outbox.outcome, outbox.aggregate.type, outbox.event.type}
//	outbox.dispatch.duration     histogram       s          interceptors + listener time of an attempt {the same}
//	outbox.dispatch.latency      histogram       s          commit (hot) or due time (cold) to attempt start {outbox.path}
//	outbox.queue.depth           updowncounter   {event}    events waiting in the in-memory queue {outbox.path}
//	outbox.poll.lag              gauge           s          age of the oldest due event the poller's last cycle saw
//	outbox.stuck_attempts        updowncounter   {attempt}  attempts whose listener ignored its context past ListenerTimeout + 1 s
//	outbox.keys_held             updowncounter   {key}      ordered events in flight here: one per order key
//	outbox.claims                counter         {claim}    MultiNode claims {outbox.claim.event: taken, renewed, lost, expired, released, taken_over}
//
// outbox.path is "hot" or "cold" and outbox.outcome is [outbox.Outcome]'s name
// (done, retry, dead, deferred, fallback). The histograms advise the boundaries of
// [DefaultBuckets]. The last four are observed when the SDK collects, from values the
// outbox's calls store, so they cost the dispatch path an atomic store. The event type
// attributes multiply the series by the number of (aggregate type, event type) pairs,
// which code fixes; to drop them, give the MeterProvider a View on [ScopeName] with an
// attribute filter. The table's own state (rows per status, the oldest pending row) is
// not measured here; read it with [outbox.Events.Stats].
package outboxotel
