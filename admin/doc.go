// Package outboxadmin serves the event admin of an outbox over HTTP: a JSON API that
// lists the events of every status (pending, retrying, waiting, dead, done, fallback,
// discarded) with filters, shows one event, replays, discards and deletes events one by
// one or in bulk, pauses and resumes subscriptions, and lists the audit trail of those
// changes, and a small HTML page on
// top of it, for the on-call engineer who has to see which events are stuck or died,
// why, and replay them after the fix without writing SQL.
//
// Import path: github.com/outboxkit/outbox/admin (package outboxadmin). It imports only
// the standard library and the core package.
//
// # Mounting
//
// [New] returns a plain [net/http.Handler] built on [net/http.ServeMux] patterns. Its
// routes are relative, so it works under any prefix; mount it with [net/http.StripPrefix]:
//
//	h, err := outboxadmin.New(ob.Events(), outboxadmin.Options{Authorize: outboxadmin.BearerToken(token)})
//	if err != nil { ... }
//	mux.Handle("/outbox/admin/", http.StripPrefix("/outbox/admin", h))
//
// A request for the prefix itself ("/outbox/admin", reaching the handler as the empty
// path) is redirected to the prefix with a trailing slash, where the page lives; the
// page calls the API with relative URLs.
//
// # Routes
//
// Relative to the mount point:
//
//	GET  /                              the HTML page (and GET /app.js, GET /app.css)
//	GET  /api/overview                  counts per status, per status and event type
//	                                    (by_type), oldest pending age, blocked keys
//	GET  /api/events                    list of one status: status (required: new, retry,
//	                                    waiting, dead, done, fallback or discarded),
//	                                    event_type, aggregate_type, aggregate_id, listener,
//	                                    error, from, to, order_key, blocking, newest,
//	                                    limit, after
//	GET  /api/events/{id}               one event of any status, with payload, headers,
//	                                    attempts, last error, every timestamp, its claim
//	POST /api/events/replay             replay the DEAD events among {"ids": [...]}
//	POST /api/events/discard            discard the DEAD or pending events among the ids
//	POST /api/events/delete             delete the DEAD events among the ids for good
//	GET  /api/audit                     the audit trail, newest first: limit, before
//	GET  /api/subscriptions             each subscription's load in the serving process:
//	                                    queued, running, its limits, limited, paused,
//	                                    and the table's pauses
//	POST /api/subscriptions/pause       pause a subscription on every process of the
//	                                    table: {"listener": "...", "reason": "..."}
//	POST /api/subscriptions/resume      resume it: {"listener": "..."}
//	GET  /api/dead-events               list of DEAD events: event_type, aggregate_type,
//	                                    listener, limit, after
//	GET  /api/dead-events/count         count: event_type, aggregate_type, listener,
//	                                    by=type, by=listener or by=type,listener
//	GET  /api/dead-events/{id}          one event, as GET /api/events/{id}
//	POST /api/dead-events/{id}/replay   replay one DEAD event; body {}
//	POST /api/dead-events/{id}/discard  discard one DEAD or pending event; body {}
//	POST /api/dead-events/{id}/delete   delete one DEAD event for good (never delivered;
//	                                    its order key moves on); body {}
//	POST /api/dead-events/replay        replay every DEAD event matching the body's filter
//	                                    {"event_type", "aggregate_type", "listener"}
//
// Every read is bounded whatever the table's size: a list page and a count each read at
// most 10,000 rows of an index ([outbox.MaxScanRows], [outbox.MaxCountRows]). A count
// that stopped there says so ("at_least": there are that many or more); see
// [outbox.Events.Overview] and [outbox.Events.Count].
//
// The listener filter matches an event's listener column: the subscription a fan-out
// delivery is for, or the listener whose delivery failed for good, so that the dead
// deliveries of one listener can be listed, counted and replayed on their own. Every
// event in a response carries it as "listener" ("" when none).
//
// A list returns at most limit events (default [DefaultLimit]; values above [MaxLimit]
// are clamped to it; anything that is not a positive decimal integer is a 400) and a
// "next" cursor, an opaque string to pass as after for the following page. Unknown or
// repeated query parameters are a 400, so a misspelled filter is never ignored.
//
// GET /api/events answers {"events": [...], "next": "", "partial": false,
// "scan_limit": 10000, "limit": 50}. Its list is in the order of its time, oldest first
// or, with newest=1, newest first: the finish time for done, fallback and discarded,
// the creation time for the other statuses, and the creation time for every status
// with aggregate_id. from (inclusive) and to (exclusive) bound that time, as RFC 3339
// ("2026-05-01T12:00:00Z", an offset allowed). error matches the events whose last
// error contains it, in any case by Unicode simple case folding and without accent
// folding, on every database ([outbox.EventFilter.ErrorContains]). A filter its index does not hold (event type,
// aggregate type, listener, error) is checked on the rows read, and a page reads at
// most scan_limit ([outbox.MaxScanRows]) rows: when it stops there with fewer events
// than the limit, partial is true and next continues the search where it stopped.
//
// order_key lists one order key's events of the status (new, retry, waiting or dead:
// the others have left their key) in the key's order, order_seq first, through the
// order index: status=waiting&order_key=K are the events that wait behind K's DEAD or
// RETRY event. It does not go with aggregate_id, from or to. blocking=1 (status retry
// or dead) lists the events that hold their order key: WAITING events of the key wait
// behind them; each row of the list probes the order index, and the filter is checked
// on the rows read, as event_type is.
//
// A bulk action takes 1 to [outbox.MaxBulkIDs] IDs, acts on those in the right state
// (an unknown ID, or one in another state, is left alone) and answers {"count": n,
// "requested": m}: how many events it changed, of how many distinct IDs.
//
// GET /api/audit answers {"entries": [{"id", "at", "actor", "action", "target",
// "count"}], "next": ""}: action is replay, replay-all, discard, delete, pause or
// resume, target the event IDs (comma-separated), the filter of a replay-all or the
// subscription, count how many events the change touched (a pause or resume: 1, or 0
// when the subscription was already so). Pass next as before for older entries.
//
// GET /api/subscriptions answers {"subscriptions": [{"listener", "queued", "running",
// "max_concurrency", "rate_limit", "limited", "paused", "pause", "registered"}],
// "pause_supported": true}, by listener: the events of each subscription queued for a
// worker in the process that serves the admin, the workers running them, its limits (0:
// none), whether queued events wait for those limits ([outbox.Events.Subscriptions]),
// and whether this process holds its events paused. Another process's queues are its
// own. pause is the table's pause of the subscription ([outbox.Events.Paused]):
// {"since", "actor", "reason"}, or null. A subscription paused in the table that this
// process does not run is listed too, with "registered": false. pause_supported is
// false when the table has no pause table (its migration was not run).
//
// POST /api/subscriptions/pause {"listener": "Order/OrderPlaced", "reason": "..."}
// pauses a subscription on every process of the table ([outbox.Events.Pause]; reason is
// optional) and POST /api/subscriptions/resume {"listener": "..."} resumes it
// ([outbox.Events.Resume]); both answer {"listener", "paused"}. The name goes in the
// body because names hold "/". It need not be registered in the serving process. Pausing
// a paused subscription, or resuming one that is not paused, changes nothing and
// answers 200. A table without the pause migration answers 501.
//
// # Audit
//
// Every change (the single-event, bulk, filter, pause and resume routes) runs under
// [outbox.WithActor] with the actor [Options.Actor] names, "admin <remote address>" by
// default, so that the audit trail of [outbox.Events] records who made it; the
// handler also logs an Info line per change with the actor, the IDs, filter or
// subscription and the count to [Options.Logger].
//
// Every response is JSON with Content-Type application/json; charset=utf-8 except the
// page and its two static files, and every response carries X-Content-Type-Options:
// nosniff, Cache-Control: no-store and a Content-Security-Policy. Errors have the shape
//
//	{"error": {"code": "not_found", "message": "no event has this ID"}}
//
// with "param" naming the offending query parameter or body field for a 400. Replaying
// or deleting an event that is not DEAD is a 409, an unknown ID a 404, a bad parameter
// or body a 400; a store that cannot list every status or keep the audit trail answers
// those routes with 501; a failure of the store is a 500 whose body says nothing about
// it (the error is logged to [Options.Logger]).
//
// # Security
//
// Without [Options.Authorize] every request gets 401. [BearerToken] checks an
// Authorization: Bearer header in constant time, [AuthorizerFunc] wraps your own check
// (a session cookie, a header set by your proxy) and [AllowAll], for local development
// only, lets everything through and logs a warning. When an authorizer is set, the page
// and its static files are served to anyone (they hold no data, and the browser must
// load them before it can send a token); every API route requires the authorizer.
//
// The page takes the token from the URL fragment (http://host/outbox/admin/#token=...;
// a fragment never reaches the server or its logs), keeps it in the tab's
// sessionStorage, removes it from the address bar, and sends it as a bearer token. It
// asks for the token when the API answers 401.
//
// Mutations are POST only (other methods get 405 with Allow), take a JSON object body
// (other content types get 415, unknown fields 400, bodies over [MaxBodyBytes] 413)
// and go through [net/http.CrossOriginProtection], so a cross-site browser request gets
// 403 and changes nothing. Stored strings reach the page only through JSON, which
// escapes <, > and &, and the page inserts them as text, never as HTML. [Options.Redact]
// can hide payload fields or headers from every response.
package outboxadmin
