package sqlstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// Golden SQL for every statement each dialect builds. The strings are exact: a change
// here is a change of the SQL users run.

var (
	goldenT0  = time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.FixedZone("X", 2*3600))
	goldenT0U = time.Date(2024, 5, 6, 5, 8, 9, 123456000, time.UTC) // goldenT0 stored
	goldenT0S = "2024-05-06T05:08:09.123456Z"                       // goldenT0 on SQLite
)

// allDialects are the dialects every builder test covers.
var allDialects = []*Dialect{Postgres, MySQL, SQLite}

type goldenCase struct {
	name    string
	build   func(d *dialect) ([]query, error)
	pg      []string
	sqlite  []string
	mysql   []string
	pgArgs  []any // nil: not checked
	sqlArgs []any
	myArgs  []any
}

func one(q query) ([]query, error) { return []query{q}, nil }

func one2(q query, err error) ([]query, error) {
	if err != nil {
		return nil, err
	}
	return []query{q}, nil
}

var goldenTable = tableName{name: DefaultTable}

const sel = "SELECT event_id, event_type, aggregate_type, aggregate_id, tenant_id, payload, headers, status, attempts, last_error, available_at, created_at, done_at, locked_by, locked_until, order_key, order_seq, first_attempt_at, listener FROM "

func goldenCases() []goldenCase {
	t := goldenTable
	return []goldenCase{
		{
			name: "insert two",
			build: func(d *dialect) ([]query, error) {
				return d.insertQueries(t, storage.InsertParams{Events: []outboxtype.Event{
					{ID: "a", Type: "T", AggregateType: "A", AggregateID: "1", TenantID: "t", Payload: json.RawMessage(`{"x":1}`),
						Headers: map[string]string{"k": "v"}, CreatedAt: goldenT0, AvailableAt: goldenT0, Status: outboxtype.StatusDead, Attempts: 3},
					{ID: "b", Type: "T", AggregateType: "A", Payload: json.RawMessage(`1`), CreatedAt: goldenT0},
				}}, time.Time{})
			},
			pg: []string{`INSERT INTO "outbox_event" (event_id, event_type, aggregate_type, aggregate_id, tenant_id, payload, headers, status, attempts, available_at, created_at) ` +
				`SELECT u.event_id, u.event_type, u.aggregate_type, u.aggregate_id, u.tenant_id, u.payload, u.headers, 0, 0, u.available_at, u.created_at ` +
				`FROM unnest(CAST($1 AS TEXT[]), CAST($2 AS TEXT[]), CAST($3 AS TEXT[]), CAST($4 AS TEXT[]), CAST($5 AS TEXT[]), CAST($6 AS JSONB[]), CAST($7 AS JSONB[]), ` +
				`CAST($8 AS TIMESTAMPTZ[]), CAST($9 AS TIMESTAMPTZ[])) AS u (event_id, event_type, aggregate_type, aggregate_id, tenant_id, payload, headers, available_at, created_at) ` +
				`ON CONFLICT (event_id) DO NOTHING RETURNING event_id, status`},
			sqlite: []string{`INSERT INTO "outbox_event" (event_id, event_type, aggregate_type, aggregate_id, tenant_id, payload, headers, status, attempts, available_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?), (?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?)`},
			mysql:  []string{"INSERT INTO `outbox_event` (event_id, event_type, aggregate_type, aggregate_id, tenant_id, payload, headers, status, attempts, available_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?), (?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?)"},
			// One array per column; the empty strings of AggregateID and TenantID are NULL.
			pgArgs: []any{`{"a","b"}`, `{"T","T"}`, `{"A","A"}`, `{"1",NULL}`, `{"t",NULL}`, `{"{\"x\":1}","1"}`, `{"{\"k\":\"v\"}",NULL}`,
				`{"2024-05-06 05:08:09.123456+00","2024-05-06 05:08:09.123456+00"}`, `{"2024-05-06 05:08:09.123456+00","2024-05-06 05:08:09.123456+00"}`},
			sqlArgs: []any{"a", "T", "A", "1", "t", `{"x":1}`, `{"k":"v"}`, goldenT0S, goldenT0S,
				"b", "T", "A", nil, nil, "1", nil, goldenT0S, goldenT0S},
			myArgs: []any{"a", "T", "A", "1", "t", `{"x":1}`, `{"k":"v"}`, goldenT0U, goldenT0U,
				"b", "T", "A", nil, nil, "1", nil, goldenT0U, goldenT0U},
		},
		{
			// One event skips an existing ID by the count of rows, without RETURNING.
			name: "insert one",
			build: func(d *dialect) ([]query, error) {
				return d.insertQueries(t, storage.InsertParams{Events: []outboxtype.Event{
					{ID: "b", Type: "T", AggregateType: "A", Payload: json.RawMessage(`1`), CreatedAt: goldenT0},
				}}, time.Time{})
			},
			pg:      []string{`INSERT INTO "outbox_event" (event_id, event_type, aggregate_type, aggregate_id, tenant_id, payload, headers, status, attempts, available_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, 0, 0, $8, $9) ON CONFLICT (event_id) DO NOTHING`},
			sqlite:  []string{`INSERT INTO "outbox_event" (event_id, event_type, aggregate_type, aggregate_id, tenant_id, payload, headers, status, attempts, available_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?)`},
			mysql:   []string{"INSERT INTO `outbox_event` (event_id, event_type, aggregate_type, aggregate_id, tenant_id, payload, headers, status, attempts, available_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?)"},
			pgArgs:  []any{"b", "T", "A", nil, nil, "1", nil, goldenT0U, goldenT0U},
			sqlArgs: []any{"b", "T", "A", nil, nil, "1", nil, goldenT0S, goldenT0S},
			myArgs:  []any{"b", "T", "A", nil, nil, "1", nil, goldenT0U, goldenT0U},
		},
		{
			// IDs generated for the write: a plain INSERT, one event or several.
			name: "insert new IDs",
			build: func(d *dialect) ([]query, error) {
				e := outboxtype.Event{ID: "b", Type: "T", AggregateType: "A", Payload: json.RawMessage(`1`), CreatedAt: goldenT0}
				one, err := d.insertQueries(t, storage.InsertParams{Events: []outboxtype.Event{e}, NewIDs: true}, time.Time{})
				if err != nil || d != Postgres {
					return one, err
				}
				f := e
				f.ID = "c"
				two, err := d.insertQueries(t, storage.InsertParams{Events: []outboxtype.Event{e, f}, NewIDs: true}, time.Time{})
				return append(one, two...), err
			},
			pg: []string{`INSERT INTO "outbox_event" (event_id, event_type, aggregate_type, aggregate_id, tenant_id, payload, headers, status, attempts, available_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, 0, 0, $8, $9)`,
				`INSERT INTO "outbox_event" (event_id, event_type, aggregate_type, aggregate_id, tenant_id, payload, headers, status, attempts, available_at, created_at) ` +
					`SELECT u.event_id, u.event_type, u.aggregate_type, u.aggregate_id, u.tenant_id, u.payload, u.headers, 0, 0, u.available_at, u.created_at ` +
					`FROM unnest(CAST($1 AS TEXT[]), CAST($2 AS TEXT[]), CAST($3 AS TEXT[]), CAST($4 AS TEXT[]), CAST($5 AS TEXT[]), CAST($6 AS JSONB[]), CAST($7 AS JSONB[]), ` +
					`CAST($8 AS TIMESTAMPTZ[]), CAST($9 AS TIMESTAMPTZ[])) AS u (event_id, event_type, aggregate_type, aggregate_id, tenant_id, payload, headers, available_at, created_at)`},
			sqlite: []string{`INSERT INTO "outbox_event" (event_id, event_type, aggregate_type, aggregate_id, tenant_id, payload, headers, status, attempts, available_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?)`},
			mysql:  []string{"INSERT INTO `outbox_event` (event_id, event_type, aggregate_type, aggregate_id, tenant_id, payload, headers, status, attempts, available_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?)"},
		},
		{
			name: "mark done",
			build: func(d *dialect) ([]query, error) {
				return d.markDoneQueries(t, storage.MarkDoneParams{IDs: []string{"a", `b"\`}, DoneAt: goldenT0})
			},
			pg:      []string{`UPDATE "outbox_event" SET status = 1, done_at = $1, locked_by = NULL, locked_until = NULL WHERE event_id = ANY(CAST($2 AS TEXT[])) AND status IN (0, 2, 3)`},
			sqlite:  []string{`UPDATE "outbox_event" SET status = 1, done_at = ?, locked_by = NULL, locked_until = NULL WHERE event_id IN (?, ?) AND status IN (0, 2, 3)`},
			mysql:   []string{"UPDATE `outbox_event` FORCE INDEX (PRIMARY) SET status = 1, done_at = ?, locked_by = NULL, locked_until = NULL WHERE event_id IN (?, ?) AND status IN (0, 2, 3)"},
			pgArgs:  []any{goldenT0U, `{"a","b\"\\"}`},
			sqlArgs: []any{goldenT0S, "a", `b"\`},
			myArgs:  []any{goldenT0U, "a", `b"\`},
		},
		{
			name: "mark done deleting",
			build: func(d *dialect) ([]query, error) {
				return d.markDoneQueries(t, storage.MarkDoneParams{IDs: []string{"a", "b"}, Tokens: []string{"n/1", "n/2"}, DoneAt: goldenT0, Delete: true})
			},
			pg: []string{`DELETE FROM "outbox_event" WHERE event_id = ANY(ARRAY(SELECT m.event_id FROM unnest(CAST($1 AS TEXT[]), CAST($2 AS TEXT[])) AS u (id, tok), ` +
				`LATERAL (SELECT x.event_id FROM "outbox_event" AS x WHERE x.event_id = u.id AND x.locked_by = u.tok FOR NO KEY UPDATE) AS m)) AND status IN (0, 2, 3)`},
			sqlite: []string{`DELETE FROM "outbox_event" WHERE (event_id, locked_by) IN ((?, ?), (?, ?)) AND status IN (0, 2, 3)`},
			// One statement a row: an IN list would wait for uncommitted newer rows.
			mysql: []string{"DELETE FROM `outbox_event` WHERE event_id = ? AND status IN (0, 2, 3) AND locked_by = ?",
				"DELETE FROM `outbox_event` WHERE event_id = ? AND status IN (0, 2, 3) AND locked_by = ?"},
			myArgs: []any{"a", "n/1"},
		},
		{
			name: "reschedule retry counting",
			build: func(d *dialect) ([]query, error) {
				return one2(d.rescheduleQuery(t, storage.RescheduleParams{ID: "a", Status: outboxtype.StatusRetry, AvailableAt: goldenT0, CountAttempt: true, LastError: "boom"}))
			},
			pg:      []string{`UPDATE "outbox_event" SET status = $1, available_at = $2, attempts = attempts + 1, first_attempt_at = COALESCE(first_attempt_at, statement_timestamp()), last_error = $3, locked_by = NULL, locked_until = NULL WHERE event_id = $4 AND status IN (0, 2, 3)`},
			sqlite:  []string{`UPDATE "outbox_event" SET status = ?, available_at = ?, attempts = attempts + 1, first_attempt_at = COALESCE(first_attempt_at, strftime('%Y-%m-%dT%H:%M:%f000Z', 'now')), last_error = ?, locked_by = NULL, locked_until = NULL WHERE event_id = ? AND status IN (0, 2, 3)`},
			mysql:   []string{"UPDATE `outbox_event` SET status = ?, available_at = ?, attempts = attempts + 1, first_attempt_at = COALESCE(first_attempt_at, UTC_TIMESTAMP(6)), last_error = ?, locked_by = NULL, locked_until = NULL WHERE event_id = ? AND status IN (0, 2, 3)"},
			pgArgs:  []any{int64(2), goldenT0U, "boom", "a"},
			sqlArgs: []any{int64(2), goldenT0S, "boom", "a"},
			myArgs:  []any{int64(2), goldenT0U, "boom", "a"},
		},
		{
			name: "reschedule deferral",
			build: func(d *dialect) ([]query, error) {
				return one2(d.rescheduleQuery(t, storage.RescheduleParams{ID: "a", Status: outboxtype.StatusNew, AvailableAt: goldenT0}))
			},
			pg:     []string{`UPDATE "outbox_event" SET status = $1, available_at = $2, locked_by = NULL, locked_until = NULL WHERE event_id = $3 AND status IN (0, 2, 3)`},
			sqlite: []string{`UPDATE "outbox_event" SET status = ?, available_at = ?, locked_by = NULL, locked_until = NULL WHERE event_id = ? AND status IN (0, 2, 3)`},
			mysql:  []string{"UPDATE `outbox_event` SET status = ?, available_at = ?, locked_by = NULL, locked_until = NULL WHERE event_id = ? AND status IN (0, 2, 3)"},
			pgArgs: []any{int64(0), goldenT0U, "a"},
		},
		{
			name: "mark dead counting",
			build: func(d *dialect) ([]query, error) {
				return one2(d.markDeadQuery(t, storage.MarkDeadParams{DeadAt: goldenT0, ID: "a", Reason: "bad", CountAttempt: true}))
			},
			pg:      []string{`UPDATE "outbox_event" SET status = 3, done_at = $1, last_error = $2, attempts = attempts + 1, first_attempt_at = COALESCE(first_attempt_at, statement_timestamp()), locked_by = NULL, locked_until = NULL WHERE event_id = $3 AND status IN (0, 2, 3)`},
			sqlite:  []string{`UPDATE "outbox_event" SET status = 3, done_at = ?, last_error = ?, attempts = attempts + 1, first_attempt_at = COALESCE(first_attempt_at, strftime('%Y-%m-%dT%H:%M:%f000Z', 'now')), locked_by = NULL, locked_until = NULL WHERE event_id = ? AND status IN (0, 2, 3)`},
			mysql:   []string{"UPDATE `outbox_event` SET status = 3, done_at = ?, last_error = ?, attempts = attempts + 1, first_attempt_at = COALESCE(first_attempt_at, UTC_TIMESTAMP(6)), locked_by = NULL, locked_until = NULL WHERE event_id = ? AND status IN (0, 2, 3)"},
			pgArgs:  []any{goldenT0U, "bad", "a"},
			sqlArgs: []any{"2024-05-06T05:08:09.123456Z", "bad", "a"},
			myArgs:  []any{goldenT0U, "bad", "a"},
		},
		{
			name: "mark dead no reason",
			build: func(d *dialect) ([]query, error) {
				return one2(d.markDeadQuery(t, storage.MarkDeadParams{DeadAt: goldenT0, ID: "a"}))
			},
			pg:     []string{`UPDATE "outbox_event" SET status = 3, done_at = $1, last_error = $2, locked_by = NULL, locked_until = NULL WHERE event_id = $3 AND status IN (0, 2, 3)`},
			sqlite: []string{`UPDATE "outbox_event" SET status = 3, done_at = ?, last_error = ?, locked_by = NULL, locked_until = NULL WHERE event_id = ? AND status IN (0, 2, 3)`},
			mysql:  []string{"UPDATE `outbox_event` SET status = 3, done_at = ?, last_error = ?, locked_by = NULL, locked_until = NULL WHERE event_id = ? AND status IN (0, 2, 3)"},
			pgArgs: []any{goldenT0U, nil, "a"},
		},
		{
			name: "pending",
			build: func(d *dialect) ([]query, error) {
				return one2(d.pendingQuery(t, storage.PendingParams{Now: goldenT0, SkipRecent: time.Second, Limit: 10}))
			},
			pg:     []string{sel + `"outbox_event" WHERE status IN (0, 2) AND available_at <= $1 AND created_at <= $2 AND available_at >= (SELECT MIN(available_at) FROM "outbox_event" WHERE status IN (0, 2)) ORDER BY available_at, created_at, event_id LIMIT $3`},
			sqlite: []string{sel + `"outbox_event" WHERE status IN (0, 2) AND available_at <= ? AND created_at <= ? ORDER BY available_at, created_at, event_id LIMIT 10`},
			mysql: []string{sel + "`outbox_event` FORCE INDEX (`outbox_event_pending_idx`) WHERE due_at <= ? AND created_at <= ?" +
				" ORDER BY due_at, created_at, event_id LIMIT ?"},
			pgArgs:  []any{goldenT0U, goldenT0U.Add(-time.Second), int64(10)},
			sqlArgs: []any{goldenT0S, "2024-05-06T05:08:08.123456Z"},
			myArgs:  []any{goldenT0U, goldenT0U.Add(-time.Second), int64(10)},
		},
		{
			name: "pending after a cursor",
			build: func(d *dialect) ([]query, error) {
				return one2(d.pendingQuery(t, storage.PendingParams{Now: goldenT0, SkipRecent: time.Second, Limit: 10,
					After: outboxtype.Cursor{AvailableAt: goldenT0.Add(-time.Minute), CreatedAt: goldenT0.Add(-time.Hour), ID: "c"}}))
			},
			pg: []string{sel + `"outbox_event" WHERE status IN (0, 2) AND available_at <= $1 AND created_at <= $2` +
				` AND (available_at, created_at, event_id) > ($3, $4, $5) ORDER BY available_at, created_at, event_id LIMIT $6`},
			sqlite: []string{sel + `"outbox_event" WHERE status IN (0, 2) AND available_at <= ? AND created_at <= ?` +
				` AND (available_at, created_at, event_id) > (?, ?, ?) ORDER BY available_at, created_at, event_id LIMIT 10`},
			mysql: []string{sel + "`outbox_event` FORCE INDEX (`outbox_event_pending_idx`) WHERE due_at <= ? AND created_at <= ?" +
				" AND (due_at > ? OR due_at = ? AND (created_at > ? OR created_at = ? AND event_id > ?)) ORDER BY due_at, created_at, event_id LIMIT ?"},
			pgArgs: []any{goldenT0U, goldenT0U.Add(-time.Second), goldenT0U.Add(-time.Minute), goldenT0U.Add(-time.Hour), "c", int64(10)},
			myArgs: []any{goldenT0U, goldenT0U.Add(-time.Second), goldenT0U.Add(-time.Minute), goldenT0U.Add(-time.Minute),
				goldenT0U.Add(-time.Hour), goldenT0U.Add(-time.Hour), "c", int64(10)},
		},
		{
			name: "pending from a low-water mark",
			build: func(d *dialect) ([]query, error) {
				return one2(d.pendingQuery(t, storage.PendingParams{Now: goldenT0, SkipRecent: time.Second, Limit: 10,
					After: outboxtype.Cursor{AvailableAt: goldenT0.Add(-time.Minute)}}))
			},
			pg: []string{sel + `"outbox_event" WHERE status IN (0, 2) AND available_at <= $1 AND created_at <= $2` +
				` AND available_at >= $3 ORDER BY available_at, created_at, event_id LIMIT $4`},
			sqlite: []string{sel + `"outbox_event" WHERE status IN (0, 2) AND available_at <= ? AND created_at <= ?` +
				` AND available_at >= ? ORDER BY available_at, created_at, event_id LIMIT 10`},
			mysql: []string{sel + "`outbox_event` FORCE INDEX (`outbox_event_pending_idx`) WHERE due_at <= ? AND created_at <= ?" +
				" AND due_at >= ? ORDER BY due_at, created_at, event_id LIMIT ?"},
			pgArgs: []any{goldenT0U, goldenT0U.Add(-time.Second), goldenT0U.Add(-time.Minute), int64(10)},
			myArgs: []any{goldenT0U, goldenT0U.Add(-time.Second), goldenT0U.Add(-time.Minute), int64(10)},
		},
		{
			name: "insert claimed",
			build: func(d *dialect) ([]query, error) {
				return d.insertQueries(t, storage.InsertParams{ClaimTTL: 30 * time.Second, Events: []outboxtype.Event{
					{ID: "a", Type: "T", AggregateType: "A", Payload: json.RawMessage(`1`), CreatedAt: goldenT0, LockedBy: "n1/01J"},
					{ID: "b", Type: "T", AggregateType: "A", Payload: json.RawMessage(`1`), CreatedAt: goldenT0},
				}}, time.Time{})
			},
			pg: []string{`INSERT INTO "outbox_event" (event_id, event_type, aggregate_type, aggregate_id, tenant_id, payload, headers, status, attempts, available_at, created_at, locked_by, locked_until) ` +
				`SELECT u.event_id, u.event_type, u.aggregate_type, u.aggregate_id, u.tenant_id, u.payload, u.headers, 0, 0, u.available_at, u.created_at, ` +
				`u.locked_by, CASE WHEN u.locked_by IS NULL THEN NULL ELSE statement_timestamp() + CAST($1 AS BIGINT) * INTERVAL '1 microsecond' END ` +
				`FROM unnest(CAST($2 AS TEXT[]), CAST($3 AS TEXT[]), CAST($4 AS TEXT[]), CAST($5 AS TEXT[]), CAST($6 AS TEXT[]), CAST($7 AS JSONB[]), CAST($8 AS JSONB[]), ` +
				`CAST($9 AS TIMESTAMPTZ[]), CAST($10 AS TIMESTAMPTZ[]), CAST($11 AS TEXT[])) AS u (event_id, event_type, aggregate_type, aggregate_id, tenant_id, payload, headers, available_at, created_at, locked_by) ` +
				`ON CONFLICT (event_id) DO NOTHING RETURNING event_id, status`},
			sqlite: []string{`INSERT INTO "outbox_event" (event_id, event_type, aggregate_type, aggregate_id, tenant_id, payload, headers, status, attempts, available_at, created_at, locked_by, locked_until) VALUES ` +
				`(?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?, ?, strftime('%Y-%m-%dT%H:%M:%f000Z', 'now', ?)), (?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?, NULL, NULL)`},
			mysql: []string{"INSERT INTO `outbox_event` (event_id, event_type, aggregate_type, aggregate_id, tenant_id, payload, headers, status, attempts, available_at, created_at, locked_by, locked_until) VALUES " +
				"(?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND), (?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?, NULL, NULL)"},
			pgArgs: []any{int64(30000000), `{"a","b"}`, `{"T","T"}`, `{"A","A"}`, `{NULL,NULL}`, `{NULL,NULL}`, `{"1","1"}`, `{NULL,NULL}`,
				`{"2024-05-06 05:08:09.123456+00","2024-05-06 05:08:09.123456+00"}`, `{"2024-05-06 05:08:09.123456+00","2024-05-06 05:08:09.123456+00"}`, `{"n1/01J",NULL}`},
			sqlArgs: []any{"a", "T", "A", nil, nil, "1", nil, goldenT0S, goldenT0S, "n1/01J", "+30.000000 seconds",
				"b", "T", "A", nil, nil, "1", nil, goldenT0S, goldenT0S},
			myArgs: []any{"a", "T", "A", nil, nil, "1", nil, goldenT0U, goldenT0U, "n1/01J", int64(30000000),
				"b", "T", "A", nil, nil, "1", nil, goldenT0U, goldenT0U},
		},
		{
			name: "claim",
			build: func(d *dialect) ([]query, error) {
				p := storage.ClaimParams{Token: "n1/01J", TTL: 30 * time.Second, SkipRecent: time.Second, Limit: 10}
				if d.claimInTx {
					read, err := d.claimReadQuery(t, p, p.Limit, nil)
					if err != nil {
						return nil, err
					}
					next, err := d.claimReadQuery(t, p, 3, &claimCursor{due: goldenT0U, created: goldenT0U, id: "b"})
					if err != nil {
						return nil, err
					}
					lock, err := d.claimLockQuery(t, p, []string{"a", "b"})
					if err != nil {
						return nil, err
					}
					return append([]query{read, next, lock}, d.claimUpdateQueries(t, p.Token, goldenT0U, []string{"a", "b"})...), nil
				}
				return one2(d.claimQuery(t, p))
			},
			pg: []string{`WITH claimed AS MATERIALIZED (SELECT event_id, locked_by FROM "outbox_event" WHERE status IN (0, 2) AND available_at <= statement_timestamp() ` +
				`AND created_at <= statement_timestamp() + CAST($1 AS BIGINT) * INTERVAL '1 microsecond' AND (locked_until IS NULL OR locked_until < statement_timestamp()) ` +
				`ORDER BY available_at, created_at, event_id LIMIT $2 FOR UPDATE SKIP LOCKED) ` +
				`UPDATE "outbox_event" AS t SET locked_by = $3, locked_until = statement_timestamp() + CAST($4 AS BIGINT) * INTERVAL '1 microsecond' ` +
				`FROM claimed WHERE t.event_id = ANY(ARRAY(SELECT event_id FROM claimed)) AND t.event_id = claimed.event_id RETURNING t.event_id, t.event_type, t.aggregate_type, t.aggregate_id, t.tenant_id, t.payload, ` +
				`t.headers, t.status, t.attempts, t.last_error, t.available_at, t.created_at, t.done_at, claimed.locked_by, t.locked_until, t.order_key, t.order_seq, t.first_attempt_at, t.listener`},
			sqlite: []string{`UPDATE "outbox_event" SET locked_by = ?, locked_until = strftime('%Y-%m-%dT%H:%M:%f000Z', 'now', ?) WHERE event_id IN (` +
				`SELECT event_id FROM "outbox_event" WHERE status IN (0, 2) AND available_at <= strftime('%Y-%m-%dT%H:%M:%f000Z', 'now') ` +
				`AND created_at <= strftime('%Y-%m-%dT%H:%M:%f000Z', 'now', ?) AND (locked_until IS NULL OR locked_until < strftime('%Y-%m-%dT%H:%M:%f000Z', 'now')) ` +
				`ORDER BY available_at, created_at, event_id LIMIT 10) RETURNING ` + selectColumns},
			mysql: []string{
				"SELECT event_id, due_at, created_at FROM `outbox_event` FORCE INDEX (`outbox_event_pending_idx`) " +
					"WHERE due_at <= UTC_TIMESTAMP(6) AND created_at <= UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND AND (locked_until IS NULL OR locked_until < UTC_TIMESTAMP(6)) " +
					"ORDER BY due_at, created_at, event_id LIMIT ?",
				"SELECT event_id, due_at, created_at FROM `outbox_event` FORCE INDEX (`outbox_event_pending_idx`) " +
					"WHERE due_at <= UTC_TIMESTAMP(6) AND created_at <= UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND AND (locked_until IS NULL OR locked_until < UTC_TIMESTAMP(6)) " +
					"AND (due_at > ? OR due_at = ? AND (created_at > ? OR created_at = ? AND event_id > ?)) ORDER BY due_at, created_at, event_id LIMIT ?",
				"SELECT " + selectColumns + ", UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND FROM `outbox_event` FORCE INDEX (PRIMARY) " +
					"WHERE due_at <= UTC_TIMESTAMP(6) AND created_at <= UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND AND (locked_until IS NULL OR locked_until < UTC_TIMESTAMP(6)) " +
					"AND event_id IN (?, ?) ORDER BY due_at, created_at, event_id FOR UPDATE SKIP LOCKED",
				"UPDATE `outbox_event` FORCE INDEX (PRIMARY) SET locked_by = ?, locked_until = ? WHERE event_id IN (?, ?)",
			},
			pgArgs:  []any{int64(-1000000), int64(10), "n1/01J", int64(30000000)},
			sqlArgs: []any{"n1/01J", "+30.000000 seconds", "-1.000000 seconds"},
			myArgs:  []any{int64(-1000000), int64(10)},
		},
		{
			// From a low-water mark: the walk of the pending index starts at DueFrom.
			name: "claim from a due time",
			build: func(d *dialect) ([]query, error) {
				p := storage.ClaimParams{Token: "n1/01J", TTL: 30 * time.Second, Limit: 10, DueFrom: goldenT0}
				if d.claimInTx {
					return one2(d.claimReadQuery(t, p, p.Limit, nil))
				}
				return one2(d.claimQuery(t, p))
			},
			pg: []string{`WITH claimed AS MATERIALIZED (SELECT event_id, locked_by FROM "outbox_event" WHERE status IN (0, 2) AND available_at <= statement_timestamp() ` +
				`AND available_at >= $1 AND created_at <= statement_timestamp() + CAST($2 AS BIGINT) * INTERVAL '1 microsecond' AND (locked_until IS NULL OR locked_until < statement_timestamp()) ` +
				`ORDER BY available_at, created_at, event_id LIMIT $3 FOR UPDATE SKIP LOCKED) ` +
				`UPDATE "outbox_event" AS t SET locked_by = $4, locked_until = statement_timestamp() + CAST($5 AS BIGINT) * INTERVAL '1 microsecond' ` +
				`FROM claimed WHERE t.event_id = ANY(ARRAY(SELECT event_id FROM claimed)) AND t.event_id = claimed.event_id RETURNING t.event_id, t.event_type, t.aggregate_type, t.aggregate_id, t.tenant_id, t.payload, ` +
				`t.headers, t.status, t.attempts, t.last_error, t.available_at, t.created_at, t.done_at, claimed.locked_by, t.locked_until, t.order_key, t.order_seq, t.first_attempt_at, t.listener`},
			sqlite: []string{`UPDATE "outbox_event" SET locked_by = ?, locked_until = strftime('%Y-%m-%dT%H:%M:%f000Z', 'now', ?) WHERE event_id IN (` +
				`SELECT event_id FROM "outbox_event" WHERE status IN (0, 2) AND available_at <= strftime('%Y-%m-%dT%H:%M:%f000Z', 'now') ` +
				`AND available_at >= ? AND created_at <= strftime('%Y-%m-%dT%H:%M:%f000Z', 'now', ?) AND (locked_until IS NULL OR locked_until < strftime('%Y-%m-%dT%H:%M:%f000Z', 'now')) ` +
				`ORDER BY available_at, created_at, event_id LIMIT 10) RETURNING ` + selectColumns},
			mysql: []string{
				"SELECT event_id, due_at, created_at FROM `outbox_event` FORCE INDEX (`outbox_event_pending_idx`) " +
					"WHERE due_at <= UTC_TIMESTAMP(6) AND due_at >= ? AND created_at <= UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND AND (locked_until IS NULL OR locked_until < UTC_TIMESTAMP(6)) " +
					"ORDER BY due_at, created_at, event_id LIMIT ?"},
			pgArgs:  []any{goldenT0U, int64(0), int64(10), "n1/01J", int64(30000000)},
			sqlArgs: []any{"n1/01J", "+30.000000 seconds", goldenT0S, "+0.000000 seconds"},
			myArgs:  []any{goldenT0U, int64(0), int64(10)},
		},
		{
			name: "renew claim",
			build: func(d *dialect) ([]query, error) {
				return one2(d.renewClaimQuery(t, storage.RenewClaimParams{ID: "a", Token: "n1/01J", TTL: 30 * time.Second}))
			},
			pg:      []string{`UPDATE "outbox_event" SET locked_until = statement_timestamp() + CAST($1 AS BIGINT) * INTERVAL '1 microsecond' WHERE event_id = $2 AND locked_by = $3 AND status IN (0, 2)`},
			sqlite:  []string{`UPDATE "outbox_event" SET locked_until = strftime('%Y-%m-%dT%H:%M:%f000Z', 'now', ?) WHERE event_id = ? AND locked_by = ? AND status IN (0, 2)`},
			mysql:   []string{"UPDATE `outbox_event` SET locked_until = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND WHERE event_id = ? AND locked_by = ? AND status IN (0, 2)"},
			pgArgs:  []any{int64(30000000), "a", "n1/01J"},
			sqlArgs: []any{"+30.000000 seconds", "a", "n1/01J"},
			myArgs:  []any{int64(30000000), "a", "n1/01J"},
		},
		{
			name: "claim update args",
			build: func(d *dialect) ([]query, error) {
				return d.claimUpdateQueries(t, "n1/01J", goldenT0U, []string{"a", "b"}), nil
			},
			pg:      []string{`UPDATE "outbox_event" SET locked_by = $1, locked_until = $2 WHERE event_id = ANY(CAST($3 AS TEXT[]))`},
			sqlite:  []string{`UPDATE "outbox_event" SET locked_by = ?, locked_until = ? WHERE event_id IN (?, ?)`},
			mysql:   []string{"UPDATE `outbox_event` FORCE INDEX (PRIMARY) SET locked_by = ?, locked_until = ? WHERE event_id IN (?, ?)"},
			pgArgs:  []any{"n1/01J", goldenT0U, `{"a","b"}`},
			sqlArgs: []any{"n1/01J", goldenT0U, "a", "b"},
			myArgs:  []any{"n1/01J", goldenT0U, "a", "b"},
		},
		{
			name: "fenced mark done",
			build: func(d *dialect) ([]query, error) {
				return d.markDoneQueries(t, storage.MarkDoneParams{IDs: []string{"a"}, DoneAt: goldenT0, Token: "n1/01J"})
			},
			pg:      []string{`UPDATE "outbox_event" SET status = 1, done_at = $1, locked_by = NULL, locked_until = NULL WHERE event_id = ANY(CAST($2 AS TEXT[])) AND status IN (0, 2, 3) AND locked_by = $3`},
			sqlite:  []string{`UPDATE "outbox_event" SET status = 1, done_at = ?, locked_by = NULL, locked_until = NULL WHERE event_id IN (?) AND status IN (0, 2, 3) AND locked_by = ?`},
			mysql:   []string{"UPDATE `outbox_event` FORCE INDEX (PRIMARY) SET status = 1, done_at = ?, locked_by = NULL, locked_until = NULL WHERE event_id IN (?) AND status IN (0, 2, 3) AND locked_by = ?"},
			pgArgs:  []any{goldenT0U, `{"a"}`, "n1/01J"},
			sqlArgs: []any{goldenT0S, "a", "n1/01J"},
		},
		{
			name: "mark done fenced row by row",
			build: func(d *dialect) ([]query, error) {
				return d.markDoneQueries(t, storage.MarkDoneParams{IDs: []string{"b", "a"}, Tokens: []string{"n1/2", "n1/1"}, DoneAt: goldenT0}) // PostgreSQL sorts the pairs by ID
			},
			pg: []string{`UPDATE "outbox_event" SET status = 1, done_at = $1, locked_by = NULL, locked_until = NULL WHERE event_id = ANY(ARRAY(SELECT m.event_id ` +
				`FROM unnest(CAST($2 AS TEXT[]), CAST($3 AS TEXT[])) AS u (id, tok), LATERAL (SELECT x.event_id FROM "outbox_event" AS x ` +
				`WHERE x.event_id = u.id AND x.locked_by = u.tok FOR NO KEY UPDATE) AS m)) AND status IN (0, 2, 3)`},
			sqlite:  []string{`UPDATE "outbox_event" SET status = 1, done_at = ?, locked_by = NULL, locked_until = NULL WHERE (event_id, locked_by) IN ((?, ?), (?, ?)) AND status IN (0, 2, 3)`},
			mysql:   []string{"UPDATE `outbox_event` FORCE INDEX (PRIMARY) SET status = 1, done_at = ?, locked_by = NULL, locked_until = NULL WHERE (event_id, locked_by) IN ((?, ?), (?, ?)) AND status IN (0, 2, 3)"},
			pgArgs:  []any{goldenT0U, `{"a","b"}`, `{"n1/1","n1/2"}`},
			sqlArgs: []any{goldenT0S, "b", "n1/2", "a", "n1/1"},
		},
		{
			name: "fenced reschedule",
			build: func(d *dialect) ([]query, error) {
				return one2(d.rescheduleQuery(t, storage.RescheduleParams{ID: "a", Status: outboxtype.StatusNew, AvailableAt: goldenT0, Token: "n1/01J"}))
			},
			pg:      []string{`UPDATE "outbox_event" SET status = $1, available_at = $2, locked_by = NULL, locked_until = NULL WHERE event_id = $3 AND status IN (0, 2, 3) AND locked_by = $4`},
			sqlite:  []string{`UPDATE "outbox_event" SET status = ?, available_at = ?, locked_by = NULL, locked_until = NULL WHERE event_id = ? AND status IN (0, 2, 3) AND locked_by = ?`},
			mysql:   []string{"UPDATE `outbox_event` SET status = ?, available_at = ?, locked_by = NULL, locked_until = NULL WHERE event_id = ? AND status IN (0, 2, 3) AND locked_by = ?"},
			pgArgs:  []any{int64(0), goldenT0U, "a", "n1/01J"},
			sqlArgs: []any{int64(0), goldenT0S, "a", "n1/01J"},
		},
		{
			name: "fenced mark dead",
			build: func(d *dialect) ([]query, error) {
				return one2(d.markDeadQuery(t, storage.MarkDeadParams{ID: "a", DeadAt: goldenT0, Reason: "r", Token: "n1/01J"}))
			},
			pg:     []string{`UPDATE "outbox_event" SET status = 3, done_at = $1, last_error = $2, locked_by = NULL, locked_until = NULL WHERE event_id = $3 AND status IN (0, 2, 3) AND locked_by = $4`},
			sqlite: []string{`UPDATE "outbox_event" SET status = 3, done_at = ?, last_error = ?, locked_by = NULL, locked_until = NULL WHERE event_id = ? AND status IN (0, 2, 3) AND locked_by = ?`},
			mysql:  []string{"UPDATE `outbox_event` SET status = 3, done_at = ?, last_error = ?, locked_by = NULL, locked_until = NULL WHERE event_id = ? AND status IN (0, 2, 3) AND locked_by = ?"},
			myArgs: []any{goldenT0U, "r", "a", "n1/01J"},
		},
		{
			name:    "get",
			build:   func(d *dialect) ([]query, error) { return one(d.getQuery(t, "a")) },
			pg:      []string{sel + `"outbox_event" WHERE event_id = $1`},
			sqlite:  []string{sel + `"outbox_event" WHERE event_id = ?`},
			mysql:   []string{sel + "`outbox_event` WHERE event_id = ?"},
			pgArgs:  []any{"a"},
			sqlArgs: []any{"a"},
			myArgs:  []any{"a"},
		},
		{
			name: "list dead first page",
			build: func(d *dialect) ([]query, error) {
				return one2(d.listDeadQuery(t, storage.ListDeadParams{Limit: 50}))
			},
			pg:     []string{sel + `"outbox_event" WHERE status = 3 ORDER BY created_at, event_id LIMIT $1`},
			sqlite: []string{sel + `"outbox_event" WHERE +status = 3 ORDER BY created_at, event_id LIMIT 50`},
			mysql:  []string{sel + "`outbox_event` WHERE status = 3 ORDER BY created_at, event_id LIMIT ?"},
			pgArgs: []any{int64(50)},
		},
		{
			name: "list dead filtered next page",
			build: func(d *dialect) ([]query, error) {
				return one2(d.listDeadQuery(t, storage.ListDeadParams{DeadFilter: outboxtype.DeadFilter{EventType: "E", AggregateType: "A"},
					After: outboxtype.Cursor{CreatedAt: goldenT0, ID: "x"}, Limit: 2}))
			},
			pg:      []string{sel + `"outbox_event" WHERE status = 3 AND event_type = $1 AND aggregate_type = $2 AND (created_at, event_id) > ($3, $4) ORDER BY created_at, event_id LIMIT $5`},
			sqlite:  []string{sel + `"outbox_event" WHERE +status = 3 AND event_type = ? AND aggregate_type = ? AND (created_at, event_id) > (?, ?) ORDER BY created_at, event_id LIMIT 2`},
			mysql:   []string{sel + "`outbox_event` WHERE status = 3 AND event_type = ? AND aggregate_type = ? AND (created_at > ? OR (created_at = ? AND event_id > ?)) ORDER BY created_at, event_id LIMIT ?"},
			myArgs:  []any{"E", "A", goldenT0U, goldenT0U, "x", int64(2)},
			pgArgs:  []any{"E", "A", goldenT0U, "x", int64(2)},
			sqlArgs: []any{"E", "A", goldenT0S, "x"},
		},
		{
			name:   "count dead",
			build:  func(d *dialect) ([]query, error) { return one(d.countDeadQuery(t, outboxtype.DeadFilter{})) },
			pg:     []string{`SELECT COUNT(*) FROM "outbox_event" WHERE status = 3`},
			sqlite: []string{`SELECT COUNT(*) FROM "outbox_event" WHERE status = 3`},
			mysql:  []string{"SELECT COUNT(*) FROM `outbox_event` WHERE status = 3"},
		},
		{
			name: "count dead by aggregate type",
			build: func(d *dialect) ([]query, error) {
				return one(d.countDeadQuery(t, outboxtype.DeadFilter{AggregateType: "A"}))
			},
			pg:     []string{`SELECT COUNT(*) FROM "outbox_event" WHERE status = 3 AND aggregate_type = $1`},
			sqlite: []string{`SELECT COUNT(*) FROM "outbox_event" WHERE status = 3 AND aggregate_type = ?`},
			mysql:  []string{"SELECT COUNT(*) FROM `outbox_event` WHERE status = 3 AND aggregate_type = ?"},
			pgArgs: []any{"A"},
		},
		{
			name: "replay ids",
			build: func(d *dialect) ([]query, error) {
				return d.replayQueries(t, storage.ReplayParams{IDs: []string{"a", "b"}, Now: goldenT0, Limit: 99})
			},
			pg:      []string{`UPDATE "outbox_event" SET status = CASE WHEN order_key IS NULL THEN 0 ELSE 4 END, attempts = 0, last_error = NULL, done_at = NULL, first_attempt_at = NULL, available_at = $1, locked_by = NULL, locked_until = NULL WHERE event_id = ANY(CAST($2 AS TEXT[])) AND status = 3`},
			sqlite:  []string{`UPDATE "outbox_event" SET status = CASE WHEN order_key IS NULL THEN 0 ELSE 4 END, attempts = 0, last_error = NULL, done_at = NULL, first_attempt_at = NULL, available_at = ?, locked_by = NULL, locked_until = NULL WHERE event_id IN (?, ?) AND +status = 3`},
			mysql:   []string{"UPDATE `outbox_event` FORCE INDEX (PRIMARY) SET status = CASE WHEN order_key IS NULL THEN 0 ELSE 4 END, attempts = 0, last_error = NULL, done_at = NULL, first_attempt_at = NULL, available_at = ?, locked_by = NULL, locked_until = NULL WHERE event_id IN (?, ?) AND status = 3"},
			pgArgs:  []any{goldenT0U, `{"a","b"}`},
			sqlArgs: []any{goldenT0S, "a", "b"},
			myArgs:  []any{goldenT0U, "a", "b"},
		},
		{
			name: "replay filter",
			build: func(d *dialect) ([]query, error) {
				return d.replayQueries(t, storage.ReplayParams{DeadFilter: outboxtype.DeadFilter{EventType: "E"}, Limit: 100, Now: goldenT0})
			},
			pg:      []string{`UPDATE "outbox_event" SET status = CASE WHEN order_key IS NULL THEN 0 ELSE 4 END, attempts = 0, last_error = NULL, done_at = NULL, first_attempt_at = NULL, available_at = $1, locked_by = NULL, locked_until = NULL WHERE event_id IN (SELECT event_id FROM "outbox_event" WHERE status = 3 AND event_type = $2 ORDER BY created_at, event_id LIMIT $3) AND status = 3`},
			sqlite:  []string{`UPDATE "outbox_event" SET status = CASE WHEN order_key IS NULL THEN 0 ELSE 4 END, attempts = 0, last_error = NULL, done_at = NULL, first_attempt_at = NULL, available_at = ?, locked_by = NULL, locked_until = NULL WHERE event_id IN (SELECT event_id FROM "outbox_event" WHERE +status = 3 AND event_type = ? ORDER BY created_at, event_id LIMIT 100) AND +status = 3`},
			mysql:   []string{"UPDATE `outbox_event` SET status = CASE WHEN order_key IS NULL THEN 0 ELSE 4 END, attempts = 0, last_error = NULL, done_at = NULL, first_attempt_at = NULL, available_at = ?, locked_by = NULL, locked_until = NULL WHERE status = 3 AND event_type = ? ORDER BY created_at, event_id LIMIT ?"},
			myArgs:  []any{goldenT0U, "E", int64(100)},
			pgArgs:  []any{goldenT0U, "E", int64(100)},
			sqlArgs: []any{goldenT0S, "E"},
		},
		{
			name: "purge",
			build: func(d *dialect) ([]query, error) {
				return one2(d.purgeQuery(t, storage.PurgeParams{Before: goldenT0, Limit: 500}, idRange{}))
			},
			pg:      []string{`DELETE FROM "outbox_event" WHERE event_id = ANY(ARRAY(SELECT event_id FROM "outbox_event" WHERE (status IN (1, 3) OR status >= 5) AND COALESCE(done_at, created_at) < $1 ORDER BY COALESCE(done_at, created_at), event_id LIMIT $2 FOR UPDATE SKIP LOCKED)) AND (status IN (1, 3) OR status >= 5) AND COALESCE(done_at, created_at) < $3`},
			sqlite:  []string{`DELETE FROM "outbox_event" WHERE event_id IN (SELECT event_id FROM "outbox_event" WHERE (+status IN (1, 3) OR +status >= 5) AND COALESCE(done_at, created_at) < ? ORDER BY COALESCE(done_at, created_at), event_id LIMIT 500) AND (+status IN (1, 3) OR +status >= 5) AND COALESCE(done_at, created_at) < ?`},
			mysql:   []string{"DELETE FROM `outbox_event` WHERE finished_at < ? ORDER BY finished_at, event_id LIMIT ?"},
			myArgs:  []any{goldenT0U, int64(500)},
			pgArgs:  []any{goldenT0U, int64(500), goldenT0U},
			sqlArgs: []any{goldenT0S, goldenT0S},
		},
		{
			// DEAD and FALLBACK rows kept longer than DONE ones: the index range reaches the
			// DONE cutoff, the later one, and each row is held to its own.
			name: "purge by outcome",
			build: func(d *dialect) ([]query, error) {
				return one2(d.purgeQuery(t, storage.PurgeParams{Before: goldenT0, DeadBefore: goldenT0.Add(-time.Hour), Limit: 500}, idRange{}))
			},
			pg:     []string{`DELETE FROM "outbox_event" WHERE event_id = ANY(ARRAY(SELECT event_id FROM "outbox_event" WHERE (status IN (1, 3) OR status >= 5) AND COALESCE(done_at, created_at) < $1 AND (status = 1 AND COALESCE(done_at, created_at) < $2 OR status <> 1 AND COALESCE(done_at, created_at) < $3) ORDER BY COALESCE(done_at, created_at), event_id LIMIT $4 FOR UPDATE SKIP LOCKED)) AND (status IN (1, 3) OR status >= 5) AND COALESCE(done_at, created_at) < $5 AND (status = 1 AND COALESCE(done_at, created_at) < $6 OR status <> 1 AND COALESCE(done_at, created_at) < $7)`},
			sqlite: []string{`DELETE FROM "outbox_event" WHERE event_id IN (SELECT event_id FROM "outbox_event" WHERE (+status IN (1, 3) OR +status >= 5) AND COALESCE(done_at, created_at) < ? AND (+status = 1 AND COALESCE(done_at, created_at) < ? OR +status <> 1 AND COALESCE(done_at, created_at) < ?) ORDER BY COALESCE(done_at, created_at), event_id LIMIT 500) AND (+status IN (1, 3) OR +status >= 5) AND COALESCE(done_at, created_at) < ? AND (+status = 1 AND COALESCE(done_at, created_at) < ? OR +status <> 1 AND COALESCE(done_at, created_at) < ?)`},
			mysql:  []string{"DELETE FROM `outbox_event` WHERE finished_at < ? AND (status = 1 AND finished_at < ? OR status <> 1 AND finished_at < ?) ORDER BY finished_at, event_id LIMIT ?"},
			myArgs: []any{goldenT0U, goldenT0U, goldenT0U.Add(-time.Hour), int64(500)},
		},
		{
			// Undelivered rows (WriterOnly's retention): NEW and RETRY along the pending
			// index (MySQL: the poll index), then WAITING along the state index (MySQL:
			// the status index), locked as the finished purge's batch is.
			name: "purge undelivered",
			build: func(d *dialect) ([]query, error) {
				before, err := d.time(goldenT0)
				if err != nil {
					return nil, err
				}
				return []query{d.purgeUndeliveredQuery(t, before, false, 500, idRange{}), d.purgeUndeliveredQuery(t, before, true, 20, idRange{})}, nil
			},
			pg: []string{`DELETE FROM "outbox_event" WHERE event_id = ANY(ARRAY(SELECT event_id FROM "outbox_event" WHERE status IN (0, 2) AND attempts >= 0 AND created_at < $1 ORDER BY created_at, event_id LIMIT $2 FOR UPDATE SKIP LOCKED)) AND status IN (0, 2) AND created_at < $3`,
				`DELETE FROM "outbox_event" WHERE event_id = ANY(ARRAY(SELECT event_id FROM "outbox_event" WHERE status = 4 AND created_at IS NOT NULL AND created_at < $1 ORDER BY created_at, event_id LIMIT $2 FOR UPDATE SKIP LOCKED)) AND status = 4 AND created_at < $3`},
			sqlite: []string{`DELETE FROM "outbox_event" WHERE event_id IN (SELECT event_id FROM "outbox_event" WHERE status IN (0, 2) AND created_at < ? ORDER BY created_at, event_id LIMIT 500) AND +status IN (0, 2) AND created_at < ?`,
				`DELETE FROM "outbox_event" WHERE event_id IN (SELECT event_id FROM "outbox_event" WHERE status IN (2, 4) AND status = 4 AND created_at < ? ORDER BY created_at, event_id LIMIT 20) AND +status = 4 AND created_at < ?`},
			mysql: []string{"DELETE FROM `outbox_event` WHERE status IN (0, 2) AND created_at < ? ORDER BY status, created_at, event_id LIMIT ?",
				"DELETE FROM `outbox_event` WHERE status = 4 AND created_at < ? ORDER BY created_at, event_id LIMIT ?"},
			pgArgs:  []any{goldenT0U, int64(500), goldenT0U},
			sqlArgs: []any{goldenT0S, goldenT0S},
			myArgs:  []any{goldenT0U, int64(500)},
		},
		{
			name:   "stats",
			build:  func(d *dialect) ([]query, error) { return one(d.statsQuery(t)) },
			pg:     []string{`SELECT status, COUNT(*), MIN(created_at) FROM "outbox_event" GROUP BY status`},
			sqlite: []string{`SELECT status, COUNT(*), MIN(created_at) FROM "outbox_event" GROUP BY status`},
			mysql:  []string{"SELECT status, COUNT(*), MIN(created_at) FROM `outbox_event` GROUP BY status"},
		},
		{
			name: "schema-qualified table",
			build: func(d *dialect) ([]query, error) {
				return one(d.getQuery(tableName{schema: "app", name: "Events"}, "a"))
			},
			pg:     []string{sel + `"app"."Events" WHERE event_id = $1`},
			sqlite: []string{sel + `"app"."Events" WHERE event_id = ?`},
			mysql:  []string{sel + "`app`.`Events` WHERE event_id = ?"},
		},
	}
}

func TestDialectGoldenSQL(t *testing.T) {
	t.Parallel()
	for _, tc := range goldenCases() {
		for _, d := range allDialects {
			t.Run(d.Name()+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				want, wantArgs := tc.pg, tc.pgArgs
				switch d {
				case SQLite:
					want, wantArgs = tc.sqlite, tc.sqlArgs
				case MySQL:
					want, wantArgs = tc.mysql, tc.myArgs
				}
				qs, err := tc.build(d)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, q := range qs {
					got = append(got, q.SQL)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("SQL\n got: %q\nwant: %q", got, want)
				}
				if wantArgs != nil && !reflect.DeepEqual(qs[0].Args, wantArgs) {
					t.Errorf("args\n got: %#v\nwant: %#v", qs[0].Args, wantArgs)
				}
				for _, q := range qs {
					if n := placeholders(d, q.SQL); n != len(q.Args) {
						t.Errorf("%d placeholders, %d args: %s", n, len(q.Args), q.SQL)
					}
				}
			})
		}
	}
}

// placeholders counts the bind variables in a statement.
func placeholders(d *dialect, sql string) int {
	if d.bindVar(1) == "?" {
		return strings.Count(sql, "?")
	}
	n := 0
	for d.bindVar(n+1) != "" && strings.Contains(sql, d.bindVar(n+1)) {
		n++
	}
	return n
}

func TestDialectGoldenDDL(t *testing.T) {
	t.Parallel()
	tables := map[string]tableName{"plain": goldenTable, "qualified": {schema: "app", name: "Events"}}
	want := map[string][]string{
		"postgres/plain": {
			`CREATE INDEX IF NOT EXISTS "outbox_event_pending_idx" ON "outbox_event" (created_at, event_id) WHERE status IN (0, 2)`,
			`CREATE INDEX IF NOT EXISTS "outbox_event_claim_idx" ON "outbox_event" (available_at, created_at, event_id) WHERE status IN (0, 2)`,
			`CREATE INDEX IF NOT EXISTS "outbox_event_dead_idx" ON "outbox_event" (created_at, event_id) WHERE status = 3`,
			`CREATE INDEX IF NOT EXISTS "outbox_event_finished_idx" ON "outbox_event" (COALESCE(done_at, created_at), event_id) WHERE status IN (1, 3)`,
			`DROP TABLE IF EXISTS "outbox_event"`,
		},
		"postgres/qualified": {
			`CREATE INDEX IF NOT EXISTS "Events_pending_idx" ON "app"."Events" (created_at, event_id) WHERE status IN (0, 2)`,
			`CREATE INDEX IF NOT EXISTS "Events_claim_idx" ON "app"."Events" (available_at, created_at, event_id) WHERE status IN (0, 2)`,
			`CREATE INDEX IF NOT EXISTS "Events_dead_idx" ON "app"."Events" (created_at, event_id) WHERE status = 3`,
			`CREATE INDEX IF NOT EXISTS "Events_finished_idx" ON "app"."Events" (COALESCE(done_at, created_at), event_id) WHERE status IN (1, 3)`,
			`DROP TABLE IF EXISTS "app"."Events"`,
		},
		"sqlite/plain": {
			`CREATE INDEX IF NOT EXISTS "outbox_event_pending_idx" ON "outbox_event" (created_at, event_id) WHERE status IN (0, 2)`,
			`CREATE INDEX IF NOT EXISTS "outbox_event_claim_idx" ON "outbox_event" (available_at, created_at, event_id) WHERE status IN (0, 2)`,
			`CREATE INDEX IF NOT EXISTS "outbox_event_dead_idx" ON "outbox_event" (created_at, event_id) WHERE +status = 3`,
			`CREATE INDEX IF NOT EXISTS "outbox_event_finished_idx" ON "outbox_event" (COALESCE(done_at, created_at), event_id) WHERE +status IN (1, 3)`,
			`DROP TABLE IF EXISTS "outbox_event"`,
		},
		"sqlite/qualified": {
			`CREATE INDEX IF NOT EXISTS "app"."Events_pending_idx" ON "Events" (created_at, event_id) WHERE status IN (0, 2)`,
			`CREATE INDEX IF NOT EXISTS "app"."Events_claim_idx" ON "Events" (available_at, created_at, event_id) WHERE status IN (0, 2)`,
			`CREATE INDEX IF NOT EXISTS "app"."Events_dead_idx" ON "Events" (created_at, event_id) WHERE +status = 3`,
			`CREATE INDEX IF NOT EXISTS "app"."Events_finished_idx" ON "Events" (COALESCE(done_at, created_at), event_id) WHERE +status IN (1, 3)`,
			`DROP TABLE IF EXISTS "app"."Events"`,
		},
	}
	for _, d := range []*Dialect{Postgres, SQLite} {
		for tn, tab := range tables {
			dd := d
			m := dd.ddl(dd, tab)
			var got []string
			for _, s := range append(m.up[1:], m.down...) {
				got = append(got, s.sql)
			}
			if key := d.Name() + "/" + tn; !reflect.DeepEqual(got, want[key]) {
				t.Errorf("%s:\n got: %q\nwant: %q", key, got, want[key])
			}
			if prefix := "CREATE TABLE IF NOT EXISTS " + dd.qualified(tab) + " (\n    event_id       VARCHAR(64)  NOT NULL PRIMARY KEY,\n"; !strings.HasPrefix(m.up[0].sql, prefix) {
				t.Errorf("%s: CREATE TABLE starts %q", d.Name(), m.up[0].sql)
			}
		}
	}
}

func TestInsertSplitsAtBindLimit(t *testing.T) {
	t.Parallel()
	for _, d := range allDialects {
		dd := d
		perStmt, lastArgs, firstArg := dd.maxBindParams/insertParamsPerRow, insertParamsPerRow, 0
		if dd.arrayInsert {
			// One array per column, of at most arrayInsertMaxRows elements.
			perStmt = arrayInsertMaxRows
		}
		events := make([]outboxtype.Event, 2*perStmt+1)
		for i := range events {
			events[i] = outboxtype.Event{ID: strconv.Itoa(i), Type: "T", AggregateType: "A", Payload: json.RawMessage(`1`), CreatedAt: goldenT0}
		}
		qs, err := dd.insertQueries(goldenTable, storage.InsertParams{Events: events}, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if len(qs) != 3 {
			t.Fatalf("%s: %d statements, want 3", d.Name(), len(qs))
		}
		for i, q := range qs {
			if len(q.Args) > dd.maxBindParams {
				t.Errorf("%s: statement %d binds %d > %d", d.Name(), i, len(q.Args), dd.maxBindParams)
			}
			if q.first != i*perStmt {
				t.Errorf("%s: statement %d starts at event %d", d.Name(), i, q.first)
			}
		}
		if got := len(qs[2].Args); got != lastArgs {
			t.Errorf("%s: last statement binds %d, want %d", d.Name(), got, lastArgs)
		}
		want := strconv.Itoa(perStmt)
		if dd.arrayInsert {
			want = `{"` + strconv.Itoa(2*perStmt) + `"}` // the last statement's IDs
			if got := qs[2].Args[firstArg]; got != want {
				t.Errorf("%s: last statement's IDs %v, want %v", d.Name(), got, want)
			}
		} else if got := qs[1].Args[firstArg]; got != want {
			t.Errorf("%s: second statement starts with %v", d.Name(), got)
		}
	}
}

// TestArrayInsertIsCached: on PostgreSQL a batch of two events or more, with any of the
// optional columns, is one statement whose text does not depend on the batch's size
// and whose arguments are few enough for the statement cache to keep it
// (maxCachedArgs). One event is a one-row VALUES, whose arguments fit the cache too.
func TestArrayInsertIsCached(t *testing.T) {
	t.Parallel()
	event := func(i int, claim, order, listener bool) outboxtype.Event {
		e := outboxtype.Event{ID: strconv.Itoa(i), Type: "T", AggregateType: "A", Payload: json.RawMessage(`1`), CreatedAt: goldenT0}
		if claim {
			e.LockedBy = "n/1"
		}
		if order {
			e.OrderKey, e.OrderSeq = "K"+strconv.Itoa(i%3), int64(i)
		}
		if listener {
			e.Listener = "L"
		}
		return e
	}
	for mask := range 16 {
		claim, order, listener, decide := mask&1 != 0, mask&2 != 0, mask&4 != 0, mask&8 != 0
		if decide && !order {
			continue
		}
		var text string
		for _, n := range []int{1, 2, 3, 100, 1000} {
			events := make([]outboxtype.Event, n)
			candidates := map[string]bool{}
			for i := range events {
				// Every other row has the optional columns, so that both forms meet.
				events[i] = event(i, claim && i%2 == 0, order && i%2 == 0, listener && i%2 == 0)
				if decide && i == 0 {
					candidates[events[i].ID] = true
				}
			}
			qs, err := Postgres.insertQueriesHeads(goldenTable, storage.InsertParams{Events: events, ClaimTTL: time.Second}, time.Time{}, nil, candidates)
			if err != nil || len(qs) != 1 {
				t.Fatalf("mask %d, %d events: %d statements, %v", mask, n, len(qs), err)
			}
			q := qs[0]
			if n > 1 && (len(q.Args) > maxCachedArgs || len(q.Args) > arrayInsertMaxArgs) {
				t.Errorf("mask %d, %d events: %d arguments > %d or %d", mask, n, len(q.Args), maxCachedArgs, arrayInsertMaxArgs)
			}
			// One event that does not decide skips an existing ID by the count of rows.
			byCount := n == 1 && !decide
			if q.first != 0 || q.n != n || q.returnsStatus == byCount || q.skipsByCount != byCount {
				t.Errorf("mask %d, %d events: first %d, n %d, returnsStatus %v, skipsByCount %v", mask, n, q.first, q.n, q.returnsStatus, q.skipsByCount)
			}
			if n == 1 {
				if strings.Contains(q.SQL, "unnest") || len(q.Args) > maxCachedArgs {
					t.Errorf("mask %d, one event: want a one-row VALUES of at most %d arguments, got %d:\n%s", mask, maxCachedArgs, len(q.Args), q.SQL)
				}
				continue
			}
			if text == "" {
				text = q.SQL
			} else if q.SQL != text {
				t.Errorf("mask %d: the text for %d events differs:\n%s\n%s", mask, n, q.SQL, text)
			}
		}
	}
}

// TestArrayLiteralTimes: the time elements are what timestamptz reads back as the same
// instant, years before 1 (BC) and after 9999 among them.
func TestArrayLiteralTimes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		t    time.Time
		want string
	}{
		{goldenT0U, `"2024-05-06 05:08:09.123456+00"`},
		{time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), `"0001-01-01 00:00:00.000000+00"`},
		{time.Date(0, 12, 31, 23, 59, 59, 999999000, time.UTC), `"0001-12-31 23:59:59.999999+00 BC"`},
		{time.Date(-9, 2, 3, 4, 5, 6, 7000, time.UTC), `"0010-02-03 04:05:06.000007+00 BC"`},
		{time.Date(12345, 6, 7, 8, 9, 10, 0, time.UTC), `"12345-06-07 08:09:10.000000+00"`},
	} {
		var sb strings.Builder
		appendArrayTime(&sb, tc.t)
		if got := sb.String(); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.t, got, tc.want)
		}
	}
}

func TestInsertDefaultsTimes(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 999, time.UTC)
	qs, err := Postgres.insertQueries(goldenTable, storage.InsertParams{Events: []outboxtype.Event{
		{ID: "a", Payload: json.RawMessage(`1`)},
		{ID: "b", Payload: json.RawMessage(`1`), CreatedAt: goldenT0},
	}}, now)
	if err != nil {
		t.Fatal(err)
	}
	// The arrays of available_at and created_at: a zero CreatedAt is now, a zero
	// AvailableAt the later of CreatedAt and now (b was created before now, so it is
	// due from the write).
	args := qs[0].Args
	if want := `{"2030-01-01 00:00:00.000000+00","2030-01-01 00:00:00.000000+00"}`; args[7] != want {
		t.Errorf("available_at: %v, want %v", args[7], want)
	}
	if want := `{"2030-01-01 00:00:00.000000+00","2024-05-06 05:08:09.123456+00"}`; args[8] != want {
		t.Errorf("created_at: %v, want %v", args[8], want)
	}
	qs, err = SQLite.insertQueries(goldenTable, storage.InsertParams{Events: []outboxtype.Event{
		{ID: "a", Payload: json.RawMessage(`1`)},
		{ID: "b", Payload: json.RawMessage(`1`), CreatedAt: goldenT0},
	}}, now)
	if err != nil {
		t.Fatal(err)
	}
	args = qs[0].Args
	nowS := "2030-01-01T00:00:00.000000Z"
	if args[7] != nowS || args[8] != nowS || args[16] != nowS || args[17] != goldenT0S {
		t.Errorf("SQLite times: %v %v %v %v", args[7], args[8], args[16], args[17])
	}
}

func TestIDListsAreChunked(t *testing.T) {
	t.Parallel()
	for _, d := range allDialects {
		dd := d
		ids := make([]string, 2*dd.maxIDs+3)
		for i := range ids {
			ids[i] = strconv.Itoa(i)
		}
		done, err := dd.markDoneQueries(goldenTable, storage.MarkDoneParams{IDs: ids, DoneAt: goldenT0})
		if err != nil {
			t.Fatal(err)
		}
		replay, err := dd.replayQueries(goldenTable, storage.ReplayParams{IDs: ids, Now: goldenT0})
		if err != nil {
			t.Fatal(err)
		}
		if len(done) != 3 || len(replay) != 3 {
			t.Errorf("%s: %d mark-done and %d replay statements, want 3 each", d.Name(), len(done), len(replay))
		}
	}
}

func TestBuildersRejectBadParams(t *testing.T) {
	t.Parallel()
	t0 := goldenT0
	cases := map[string]func(d *dialect) error{
		"mark done no ids": func(d *dialect) error {
			_, err := d.markDoneQueries(goldenTable, storage.MarkDoneParams{DoneAt: t0})
			return err
		},
		"mark done zero time": func(d *dialect) error {
			_, err := d.markDoneQueries(goldenTable, storage.MarkDoneParams{IDs: []string{"a"}})
			return err
		},
		"reschedule no id": func(d *dialect) error {
			_, err := d.rescheduleQuery(goldenTable, storage.RescheduleParams{Status: outboxtype.StatusRetry, AvailableAt: t0})
			return err
		},
		"reschedule to dead": func(d *dialect) error {
			_, err := d.rescheduleQuery(goldenTable, storage.RescheduleParams{ID: "a", Status: outboxtype.StatusDead, AvailableAt: t0})
			return err
		},
		"reschedule zero time": func(d *dialect) error {
			_, err := d.rescheduleQuery(goldenTable, storage.RescheduleParams{ID: "a", Status: outboxtype.StatusRetry})
			return err
		},
		"mark dead no id": func(d *dialect) error {
			_, err := d.markDeadQuery(goldenTable, storage.MarkDeadParams{DeadAt: goldenT0, Reason: "x"})
			return err
		},
		"pending zero limit": func(d *dialect) error {
			_, err := d.pendingQuery(goldenTable, storage.PendingParams{Now: t0})
			return err
		},
		"pending negative skip": func(d *dialect) error {
			_, err := d.pendingQuery(goldenTable, storage.PendingParams{Now: t0, Limit: 1, SkipRecent: -1})
			return err
		},
		"pending zero now": func(d *dialect) error {
			_, err := d.pendingQuery(goldenTable, storage.PendingParams{Limit: 1})
			return err
		},
		"list dead zero limit": func(d *dialect) error {
			_, err := d.listDeadQuery(goldenTable, storage.ListDeadParams{})
			return err
		},
		"replay nothing": func(d *dialect) error {
			_, err := d.replayQueries(goldenTable, storage.ReplayParams{Now: t0})
			return err
		},
		"replay zero now": func(d *dialect) error {
			_, err := d.replayQueries(goldenTable, storage.ReplayParams{IDs: []string{"a"}})
			return err
		},
		"purge negative limit": func(d *dialect) error {
			_, err := d.purgeQuery(goldenTable, storage.PurgeParams{Before: t0, Limit: -1}, idRange{})
			return err
		},
		"purge zero before": func(d *dialect) error {
			_, err := d.purgeQuery(goldenTable, storage.PurgeParams{Limit: 1}, idRange{})
			return err
		},
		"insert without id": func(d *dialect) error {
			_, err := d.insertQueries(goldenTable, storage.InsertParams{Events: []outboxtype.Event{{Payload: json.RawMessage(`1`)}}}, t0)
			return err
		},
		"insert claimed without ttl": func(d *dialect) error {
			_, err := d.insertQueries(goldenTable, storage.InsertParams{Events: []outboxtype.Event{{ID: "a", Payload: json.RawMessage(`1`), LockedBy: "n/1"}}}, t0)
			return err
		},
		"insert token too long": func(d *dialect) error {
			_, err := d.insertQueries(goldenTable, storage.InsertParams{ClaimTTL: time.Second,
				Events: []outboxtype.Event{{ID: "a", Payload: json.RawMessage(`1`), LockedBy: strings.Repeat("t", outboxtype.MaxClaimTokenLen+1)}}}, t0)
			return err
		},
		"insert negative ttl": func(d *dialect) error {
			_, err := d.insertQueries(goldenTable, storage.InsertParams{ClaimTTL: -time.Second, Events: []outboxtype.Event{{ID: "a", Payload: json.RawMessage(`1`)}}}, t0)
			return err
		},
		"mark done token too long": func(d *dialect) error {
			_, err := d.markDoneQueries(goldenTable, storage.MarkDoneParams{IDs: []string{"a"}, DoneAt: t0, Token: strings.Repeat("t", outboxtype.MaxClaimTokenLen+1)})
			return err
		},
		"reschedule token too long": func(d *dialect) error {
			_, err := d.rescheduleQuery(goldenTable, storage.RescheduleParams{ID: "a", Status: outboxtype.StatusNew, AvailableAt: t0, Token: strings.Repeat("t", outboxtype.MaxClaimTokenLen+1)})
			return err
		},
		"mark dead token too long": func(d *dialect) error {
			_, err := d.markDeadQuery(goldenTable, storage.MarkDeadParams{ID: "a", DeadAt: t0, Token: strings.Repeat("t", outboxtype.MaxClaimTokenLen+1)})
			return err
		},
	}
	claimCases := map[string]storage.ClaimParams{
		"claim empty token":     {TTL: time.Second, Limit: 1},
		"claim token too long":  {Token: strings.Repeat("t", outboxtype.MaxClaimTokenLen+1), TTL: time.Second, Limit: 1},
		"claim zero ttl":        {Token: "n/1", Limit: 1},
		"claim sub-microsecond": {Token: "n/1", TTL: time.Nanosecond, Limit: 1},
		"claim negative skip":   {Token: "n/1", TTL: time.Second, SkipRecent: -time.Second, Limit: 1},
		"claim zero limit":      {Token: "n/1", TTL: time.Second},
	}
	for name, p := range map[string]storage.RenewClaimParams{
		"renew without id":    {Token: "n/1", TTL: time.Second},
		"renew without token": {ID: "a", TTL: time.Second},
		"renew zero ttl":      {ID: "a", Token: "n/1"},
	} {
		cases[name] = func(d *dialect) error {
			_, err := d.renewClaimQuery(goldenTable, p)
			return err
		}
	}
	for name, p := range claimCases {
		cases[name] = func(d *dialect) error {
			if d.claimInTx {
				if _, err := d.claimLockQuery(goldenTable, p, []string{"a"}); !errors.Is(err, outboxtype.ErrInvalidArgument) {
					return fmt.Errorf("claimLockQuery: %w", err)
				}
				_, err := d.claimReadQuery(goldenTable, p, 10, nil)
				return err
			}
			_, err := d.claimQuery(goldenTable, p)
			return err
		}
	}
	for name, build := range cases {
		for _, d := range allDialects {
			if err := build(d); !errors.Is(err, outboxtype.ErrInvalidArgument) {
				t.Errorf("%s/%s: err = %v, want ErrInvalidArgument", d.Name(), name, err)
			}
		}
	}
}

// TestClaimDueFromOutOfRange: a DueFrom the database's times cannot hold (MySQL's
// DATETIME from year 1000, SQLite's text from year 1) is ErrInvalidArgument before any
// SQL; PostgreSQL's timestamptz holds it.
func TestClaimDueFromOutOfRange(t *testing.T) {
	t.Parallel()
	p := storage.ClaimParams{Token: "n1/01J", TTL: time.Second, Limit: 1, DueFrom: time.Date(999, 1, 1, 0, 0, 0, 0, time.UTC)}
	if _, err := MySQL.claimReadQuery(goldenTable, p, 1, nil); !errors.Is(err, outboxtype.ErrInvalidArgument) {
		t.Errorf("MySQL, year 999: %v, want ErrInvalidArgument", err)
	}
	p.DueFrom = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := SQLite.claimQuery(goldenTable, p); !errors.Is(err, outboxtype.ErrInvalidArgument) {
		t.Errorf("SQLite, year 0: %v, want ErrInvalidArgument", err)
	}
	if _, err := Postgres.claimQuery(goldenTable, p); err != nil {
		t.Errorf("PostgreSQL, year 0: %v", err)
	}
}

func TestSQLiteTimeEncoding(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   time.Time
		want string
	}{
		{time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC), "2024-01-02T03:04:05.000000Z"},
		{time.Date(2024, 1, 2, 3, 4, 5, 999999999, time.UTC), "2024-01-02T03:04:05.999999Z"},
		{goldenT0, goldenT0S},
		{time.Time{}, "0001-01-01T00:00:00.000000Z"},
		{time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), "9999-12-31T23:59:59.000000Z"},
	}
	for _, c := range cases {
		got, err := SQLite.time(c.in)
		if err != nil || got != c.want {
			t.Errorf("time(%v) = %v, %v; want %s", c.in, got, err, c.want)
		}
		back, err := decodeTime(got)
		if err != nil || !back.Equal(utcMicro(c.in)) || back.Location() != time.UTC {
			t.Errorf("decodeTime(%v) = %v, %v", got, back, err)
		}
	}
	if _, err := SQLite.time(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)); err == nil {
		t.Error("year 10000 encoded without error")
	}
	// Text order is time order, the property every range condition relies on.
	a, _ := encodeSQLiteTime(time.Date(2024, 1, 2, 3, 4, 5, 9000, time.UTC))
	b, _ := encodeSQLiteTime(time.Date(2024, 1, 2, 3, 4, 5, 10000, time.UTC))
	if !(a.(string) < b.(string)) {
		t.Errorf("%v !< %v", a, b)
	}
}

func TestDecodeTimeAcceptsDriverForms(t *testing.T) {
	t.Parallel()
	want := time.Date(2024, 5, 6, 5, 8, 9, 123456000, time.UTC)
	for _, v := range []any{
		goldenT0, goldenT0S, []byte(goldenT0S), "2024-05-06T07:08:09.123456789+02:00",
		"2024-05-06 05:08:09.123456+00:00", "2024-05-06 05:08:09.123456+00", "2024-05-06 05:08:09.123456",
		goldenT0.In(time.FixedZone("CEST", 2*3600)).String(),
	} {
		if got, err := decodeTime(v); err != nil || !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("decodeTime(%#v) = %v, %v", v, got, err)
		}
	}
	for _, v := range []any{nil, "yesterday", 42, []byte("2024-13-01")} {
		if _, err := decodeTime(v); err == nil {
			t.Errorf("decodeTime(%#v) succeeded", v)
		}
	}
}

func TestTruncateLastError(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", outboxtype.MaxLastErrorLen) // 2 bytes each
	cases := map[string]struct{ in, want string }{
		"short":       {"boom", "boom"},
		"exact":       {strings.Repeat("a", outboxtype.MaxLastErrorLen), strings.Repeat("a", outboxtype.MaxLastErrorLen)},
		"cut ascii":   {strings.Repeat("a", outboxtype.MaxLastErrorLen+5), strings.Repeat("a", outboxtype.MaxLastErrorLen)},
		"cut rune":    {"a" + long, "a" + strings.Repeat("é", (outboxtype.MaxLastErrorLen-1)/2)},
		"invalid":     {"a\xffb", "a\uFFFDb"},
		"nul":         {"a\x00b", "a\uFFFDb"},
		"empty stays": {"", ""},
	}
	for name, c := range cases {
		if got := truncateLastError(c.in); got != c.want {
			t.Errorf("%s: got %d bytes %q…, want %d bytes", name, len(got), got[:min(len(got), 10)], len(c.want))
		}
	}
}

func TestTextArrayLiteral(t *testing.T) {
	t.Parallel()
	cases := map[string][]string{
		`{"a"}`:               {"a"},
		`{"a","b,c","{d}"}`:   {"a", "b,c", "{d}"},
		`{"q\"","b\\s",""}`:   {`q"`, `b\s`, ""},
		`{"NULL"," spaced "}`: {"NULL", " spaced "},
	}
	for want, in := range cases {
		if got := textArrayLiteral(in); got != want {
			t.Errorf("textArrayLiteral(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestMarkDoneTokensChunks: a fenced-row-by-row MarkDone is split so that no statement
// carries more placeholders than its database allows, and every pair is in one.
func TestMarkDoneTokensChunks(t *testing.T) {
	t.Parallel()
	ids, tokens := make([]string, 1200), make([]string, 1200)
	for i := range ids {
		ids[i], tokens[i] = fmt.Sprintf("e%d", i), fmt.Sprintf("n/%d", i%7)
	}
	for _, d := range allDialects {
		dd := d
		qs, err := dd.markDoneQueries(goldenTable, storage.MarkDoneParams{IDs: ids, Tokens: tokens, DoneAt: goldenT0})
		if err != nil {
			t.Fatal(err)
		}
		pairs := 0
		for _, q := range qs {
			if len(q.Args) > dd.maxBindParams {
				t.Errorf("%s: a statement has %d arguments, more than %d", d.Name(), len(q.Args), dd.maxBindParams)
			}
			if dd.idsAsArray {
				pairs += strings.Count(q.Args[1].(string), ",") + 1
			} else {
				pairs += (len(q.Args) - 1) / 2
			}
		}
		if pairs != len(ids) {
			t.Errorf("%s: %d statements match %d pairs, want %d", d.Name(), len(qs), pairs, len(ids))
		}
		if d == SQLite && len(qs) < 3 {
			t.Errorf("sqlite: %d statements for 1200 pairs, want them split under 999 arguments", len(qs))
		}
	}
}
