// Package outboxprom exports the outbox's metrics to Prometheus with
// github.com/prometheus/client_golang.
//
// Import it as
//
//	import outboxprom "github.com/outboxkit/outbox/adapters/prometheus"
//
// The package is named outboxprom so that it never shadows client_golang's prometheus.
//
// # Wiring
//
// [New] implements the core's [outbox.Metrics] hook and registers its metrics on the
// registerer you pass; it never touches the global registry. [NewStatsCollector] reads the
// outbox table at scrape time; register it yourself:
//
//	reg := prometheus.NewRegistry()
//	m, err := outboxprom.New(reg, outboxprom.Options{Instance: "orders"})
//	...
//	ob, err := outbox.New(db, outbox.Config{Dialect: outbox.Postgres, Metrics: m})
//	...
//	stats, err := outboxprom.NewStatsCollector(ob.Events(), outboxprom.StatsOptions{Instance: "orders"})
//	...
//	if err := reg.Register(stats); err != nil { ... }
//	http.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// Several outboxes in one process share a registry when each has its own Instance: it
// becomes the constant label outbox="<Instance>" on every series. Registering the same
// Namespace and Instance twice returns an error matching *prometheus.AlreadyRegisteredError.
//
// # Metrics of the hook
//
// Names assume the default Namespace "outbox".
//
//	outbox_hot_enqueued_total             counter    committed events handed to the hot queue
//	outbox_hot_dropped_total              counter    committed events the full (or stopped) hot queue refused; the poller delivers them
//	outbox_hot_delayed_skipped_total      counter    committed events that skipped the hot queue because they are delayed
//	outbox_cold_enqueued_total            counter    pending events the poller handed to the cold queue
//	outbox_dispatch_total                 counter    finished delivery attempts {path, outcome}
//	outbox_listener_duration_seconds      histogram  interceptors + listener time of an attempt {outcome}
//	outbox_dispatch_latency_seconds       histogram  commit (hot) or due time (cold) to attempt start {path}
//	outbox_queue_depth                    gauge      events waiting in the in-memory queue {path}
//	outbox_poll_lag_seconds               gauge      age of the oldest due event the poller's last cycle saw
//	outbox_stuck_attempts                 gauge      attempts whose listener ignored its context past ListenerTimeout + 1 s
//	outbox_claims_total                   counter    MultiNode claims {event: taken, renewed, lost, expired, released}
//
// The label path is "hot" (handed over after commit) or "cold" (read by the poller). The
// label outcome is [outbox.Outcome]'s name:
//
//	done      OutcomeDone      the event is DONE
//	retry     OutcomeRetry     the attempt failed (error, panic, timeout, RetryAfter); the event is RETRY
//	dead      OutcomeDead      the event is DEAD: attempts exhausted, Dead, ErrUnrecoverable, unroutable or undecodable
//	deferred  OutcomeDeferred  the listener returned Defer; no attempt was counted
//	fallback  OutcomeFallback  the event failed for good and its Subscription.Fallback handled it: FALLBACK
//
// With [Options.EventTypeLabels], outbox_dispatch_total and
// outbox_listener_duration_seconds also carry aggregate_type and event_type. It is off by
// default because every event type then multiplies the series. [Options.ListenerLabels]
// adds listener, the name of the listener that ran.
//
// # Metrics read at scrape time
//
//	outbox_events{status}                 gauge      rows per status: new, retry, done, dead, waiting, fallback, discarded
//	outbox_oldest_pending_age_seconds     gauge      now minus created_at of the oldest NEW or RETRY row; 0 when none
//	outbox_dead_events                    gauge      DEAD rows (equals outbox_events{status="dead"}, for simple alerts)
//	outbox_stats_up                       gauge      1 if the last read succeeded, else 0
//	outbox_stats_errors_total             counter    failed or timed-out reads
//
// The [StatsCollector] runs one grouped query (storage.StatsStore.Stats) per read, bounded by
// [StatsOptions.Timeout] and cached for [StatsOptions.CacheTTL]; concurrent scrapes share
// a read. When the read fails, the table series are left out and outbox_stats_up is 0:
// the scrape itself succeeds, so the hook's metrics are never lost to a database outage.
//
// The age is measured by this process's clock against created_at, which the writing
// process stamped with its own clock: keep the hosts' clocks synchronised. It includes
// events that wait on purpose (DeliverAfter, RetryAfter, retry backoff); alert on it with
// a threshold above your longest intended delay, or use outbox_poll_lag_seconds, which
// counts from when an event became due.
//
// # Alerting
//
// Typical rules:
//
//	outbox_oldest_pending_age_seconds > 300             events are not getting out
//	outbox_dead_events > 0                              something needs a replay
//	rate(outbox_hot_dropped_total[5m]) > 0              the hot queue overflows; raise HotQueueSize or Workers
//	outbox_stats_up == 0                                the table cannot be read
package outboxprom
