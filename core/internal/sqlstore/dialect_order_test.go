package sqlstore

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// The statements of ordered delivery, as each dialect builds them: on MySQL the read of
// keys A and B before their lock, the key upserts of
// an insert of keys A (2 events) and B (1), Promote of keys A and B with DEAD blocking
// (on MySQL also the same read with the keys found idle, promoteIdleQuery),
// Promote of any key (on MySQL the reads of the heads), the update by ID of two heads
// with a claim (MySQL's second statement), the purge of the key table, and an insert
// of one ordered and one unordered event; on PostgreSQL then the one-statement write of
// two events of key A (the second with a claim) and one of key B. The plans are asserted against real databases in
// TestQueriesUseIndexes and TestMySQLQueriesUseIndexes.
func orderGoldenQueries(dd *dialect) []query {
	tb := tableName{name: DefaultTable}
	var out []query
	keys := []keyCount{{"A", 2}, {"B", 1}}
	mo, isMySQL := dd.order.(mysqlOrder)
	if isMySQL {
		out = append(out, mo.snapshotKeysQuery(dd, tb, keys))
	}
	out = append(out, dd.order.lockKeysQueries(dd, tb, keys, map[string]keySnapshot{"A": {seq: 5, at: 7}}, goldenT0)...)
	q, _ := dd.promoteQuery(tb, storage.PromoteParams{Keys: []string{"A", "B"}, DeadBlocks: true})
	out = append(out, q)
	if isMySQL {
		q, _ = mo.promoteIdleQuery(dd, tb, storage.PromoteParams{Keys: []string{"A", "B"}, DeadBlocks: true})
		out = append(out, q)
	}
	q, _ = dd.promoteQuery(tb, storage.PromoteParams{Limit: 100})
	out = append(out, q)
	out = append(out, dd.promoteIDsQueries(tb, []string{"a", "b"}, storage.PromoteParams{Token: "n/1", TTL: time.Second})...)
	upTo := "K9"
	out = append(out, dd.keyBoundQuery(tb, "K0", 10), dd.purgeKeysQuery(tb, "T", "K0", &upTo), dd.purgeKeysQuery(tb, "T", "K9", nil))
	qs, _ := dd.insertQueries(tb, storage.InsertParams{Events: []outboxtype.Event{
		{ID: "a", Type: "T", AggregateType: "A", Payload: json.RawMessage(`1`), CreatedAt: time.Unix(0, 0), OrderKey: "K", OrderSeq: 7},
		{ID: "b", Type: "T", AggregateType: "A", Payload: json.RawMessage(`1`), CreatedAt: time.Unix(0, 0)},
	}}, time.Time{})
	out = append(out, qs...)
	if po, ok := dd.order.(postgresOrder); ok {
		q, fits, err := po.insertByVersionQuery(dd, tb, storage.InsertParams{ClaimTTL: time.Second, Events: []outboxtype.Event{
			{ID: "a", Type: "T", AggregateType: "A", Payload: json.RawMessage(`1`), CreatedAt: time.Unix(0, 0), OrderKey: "A"},
			{ID: "b", Type: "T", AggregateType: "A", Payload: json.RawMessage(`1`), CreatedAt: time.Unix(0, 0), OrderKey: "B", LockedBy: "n/1"},
			{ID: "c", Type: "T", AggregateType: "A", Payload: json.RawMessage(`1`), CreatedAt: time.Unix(0, 0), OrderKey: "A"},
		}}, keys, time.Time{})
		if err != nil || !fits {
			panic(fmt.Sprintf("insertByVersionQuery: %v, fits %v", err, fits))
		}
		out = append(out, q)
	}
	return out
}

// TestHeadInInsertSQL: on PostgreSQL the INSERT decides whether the first event of a key
// is NEW (and claimed) or WAITING, and returns the statuses; later events of the key wait.
func TestHeadInInsertSQL(t *testing.T) {
	t.Parallel()
	events := []outboxtype.Event{
		{ID: "a", Type: "T", AggregateType: "A", Payload: json.RawMessage(`1`), CreatedAt: time.Unix(0, 0), OrderKey: "K", OrderSeq: 7, LockedBy: "n/1"},
		{ID: "b", Type: "T", AggregateType: "A", Payload: json.RawMessage(`1`), CreatedAt: time.Unix(0, 0), OrderKey: "K", OrderSeq: 8, LockedBy: "n/1"},
	}
	qs, err := Postgres.insertQueriesHeads(tableName{name: DefaultTable}, storage.InsertParams{Events: events, ClaimTTL: time.Second},
		time.Time{}, nil, map[string]bool{"a": true})
	if err != nil || len(qs) != 1 || !qs[0].returnsStatus {
		t.Fatalf("insertQueriesHeads: %d queries, %v", len(qs), err)
	}
	// PostgreSQL: the row that decides probes its own key (u.order_key), in each of the
	// three columns it decides, as the VALUES form of SQLite below does.
	blocked := "CASE WHEN u.decide THEN EXISTS (SELECT 1 FROM \"outbox_event\" o WHERE o.order_key = u.order_key AND o.status <> 1 AND o.status < 5) END"
	want := "INSERT INTO \"outbox_event\" (event_id, event_type, aggregate_type, aggregate_id, tenant_id, payload, headers, status, attempts, " +
		"available_at, created_at, locked_by, locked_until, order_key, order_seq) SELECT u.event_id, u.event_type, u.aggregate_type, u.aggregate_id, u.tenant_id, u.payload, u.headers, " +
		"CASE WHEN " + blocked + " THEN 4 ELSE u.status END, 0, u.available_at, u.created_at, CASE WHEN " + blocked + " THEN NULL ELSE u.locked_by END, " +
		"CASE WHEN u.locked_by IS NULL THEN NULL WHEN " + blocked + " THEN NULL ELSE statement_timestamp() + CAST($1 AS BIGINT) * INTERVAL '1 microsecond' END, u.order_key, u.order_seq " +
		"FROM unnest(CAST($2 AS TEXT[]), CAST($3 AS TEXT[]), CAST($4 AS TEXT[]), CAST($5 AS TEXT[]), CAST($6 AS TEXT[]), CAST($7 AS JSONB[]), CAST($8 AS JSONB[]), CAST($9 AS SMALLINT[]), " +
		"CAST($10 AS TIMESTAMPTZ[]), CAST($11 AS TIMESTAMPTZ[]), CAST($12 AS TEXT[]), CAST($13 AS TEXT[]), CAST($14 AS BIGINT[]), CAST($15 AS BOOLEAN[])) " +
		"AS u (event_id, event_type, aggregate_type, aggregate_id, tenant_id, payload, headers, status, available_at, created_at, locked_by, order_key, order_seq, decide) " +
		"ON CONFLICT (event_id) DO NOTHING RETURNING event_id, status"
	if qs[0].SQL != want {
		t.Errorf("got:  %s\nwant: %s", qs[0].SQL, want)
	}
	// The first decides, NEW and claimed unless its key is open; the second waits, unclaimed.
	wantArgs := []any{int64(1000000), `{"a","b"}`, `{"T","T"}`, `{"A","A"}`, `{NULL,NULL}`, `{NULL,NULL}`, `{"1","1"}`, `{NULL,NULL}`, `{0,4}`,
		`{"1970-01-01 00:00:00.000000+00","1970-01-01 00:00:00.000000+00"}`, `{"1970-01-01 00:00:00.000000+00","1970-01-01 00:00:00.000000+00"}`,
		`{"n/1",NULL}`, `{"K","K"}`, `{7,8}`, `{true,false}`}
	if !reflect.DeepEqual(qs[0].Args, wantArgs) {
		t.Errorf("args %#v\nwant %#v", qs[0].Args, wantArgs)
	}
	// SQLite decides the same way, and returns statuses only from an INSERT that decides
	// some (dialect.skipOnlyDeciding).
	qs, err = SQLite.insertQueriesHeads(tableName{name: DefaultTable}, storage.InsertParams{Events: events[:1], ClaimTTL: time.Second}, time.Time{}, nil,
		map[string]bool{"a": true})
	if err != nil || len(qs) != 1 || !qs[0].returnsStatus {
		t.Fatalf("SQLite insertQueriesHeads: %d queries, %v", len(qs), err)
	}
	want = "INSERT INTO \"outbox_event\" (event_id, event_type, aggregate_type, aggregate_id, tenant_id, payload, headers, status, attempts, " +
		"available_at, created_at, locked_by, locked_until, order_key, order_seq) VALUES (?, ?, ?, ?, ?, ?, ?, " +
		"CASE WHEN EXISTS (SELECT 1 FROM \"outbox_event\" WHERE order_key = ? AND status <> 1 AND status < 5) THEN 4 ELSE 0 END, 0, ?, ?, " +
		"CASE WHEN EXISTS (SELECT 1 FROM \"outbox_event\" WHERE order_key = ? AND status <> 1 AND status < 5) THEN NULL ELSE ? END, " +
		"CASE WHEN EXISTS (SELECT 1 FROM \"outbox_event\" WHERE order_key = ? AND status <> 1 AND status < 5) THEN NULL ELSE strftime('%Y-%m-%dT%H:%M:%f000Z', 'now', ?) END, " +
		"?, ?) ON CONFLICT (event_id) DO NOTHING RETURNING event_id, status"
	if qs[0].SQL != want {
		t.Errorf("SQLite got:  %s\nwant: %s", qs[0].SQL, want)
	}
	qs, err = SQLite.insertQueriesHeads(tableName{name: DefaultTable}, storage.InsertParams{Events: events[1:], ClaimTTL: time.Second}, time.Time{}, map[string]bool{}, nil)
	if err != nil || len(qs) != 1 || qs[0].returnsStatus || strings.Contains(qs[0].SQL, "RETURNING") {
		t.Fatalf("SQLite insert deciding nothing: %v, %+v", err, qs)
	}
}

func TestOrderGoldenSQL(t *testing.T) {
	t.Parallel()
	want := map[string][]string{
		"postgres": {
			"INSERT INTO \"outbox_event_key\" AS k (order_key, last_seq, updated_at) VALUES ($1, $2, statement_timestamp()), ($3, $4, statement_timestamp()) ON CONFLICT (order_key) DO UPDATE SET last_seq = k.last_seq + excluded.last_seq, updated_at = excluded.updated_at RETURNING order_key, last_seq",
			"WITH h AS MATERIALIZED (SELECT event_id FROM \"outbox_event\" WHERE event_id = ANY(ARRAY(SELECT w.event_id FROM (SELECT (SELECT f.event_id FROM \"outbox_event\" f WHERE f.order_key = k.order_key AND f.status <> 1 AND f.status < 5 ORDER BY f.order_seq LIMIT 1) AS id FROM \"outbox_event_key\" k WHERE k.order_key = ANY(CAST($1 AS TEXT[]))) h JOIN \"outbox_event\" w ON w.event_id = h.id WHERE w.status = 4 AND NOT EXISTS (SELECT 1 FROM \"outbox_event\" a WHERE a.order_key = w.order_key AND a.status <> 1 AND a.status < 5 AND a.status IN (0, 2, 3) OFFSET 0) LIMIT $2)) AND status = 4 ORDER BY event_id FOR UPDATE) UPDATE \"outbox_event\" AS t SET status = 0, available_at = GREATEST(available_at, statement_timestamp()) FROM h WHERE t.event_id = h.event_id AND t.status = 4",
			"WITH h AS MATERIALIZED (SELECT event_id FROM \"outbox_event\" WHERE event_id = ANY(ARRAY(SELECT w.event_id FROM \"outbox_event\" w WHERE w.order_key IS NOT NULL AND w.status <> 1 AND w.status < 5 AND w.status = 4 AND w.order_seq = (SELECT MIN(m.order_seq) FROM \"outbox_event\" m WHERE m.order_key = w.order_key AND m.status <> 1 AND m.status < 5 AND m.status = 4) AND NOT EXISTS (SELECT 1 FROM \"outbox_event\" a WHERE a.order_key = w.order_key AND a.status <> 1 AND a.status < 5 AND a.status IN (0, 2) OFFSET 0) LIMIT $1)) AND status = 4 ORDER BY event_id FOR UPDATE) UPDATE \"outbox_event\" AS t SET status = 0, available_at = GREATEST(available_at, statement_timestamp()) FROM h WHERE t.event_id = h.event_id AND t.status = 4",
			"UPDATE \"outbox_event\" SET status = 0, available_at = GREATEST(available_at, statement_timestamp()), locked_by = $1, locked_until = statement_timestamp() + CAST($2 AS BIGINT) * INTERVAL '1 microsecond' WHERE event_id = ANY(CAST($3 AS TEXT[])) AND status = 4",
			"SELECT order_key FROM \"outbox_event_key\" WHERE order_key > $1 ORDER BY order_key LIMIT 1 OFFSET $2",
			"DELETE FROM \"outbox_event_key\" WHERE order_key IN (SELECT k.order_key FROM \"outbox_event_key\" k WHERE k.order_key > $1 AND k.order_key <= $2 AND k.updated_at < $3 AND NOT EXISTS (SELECT 1 FROM \"outbox_event\" e WHERE e.order_key = k.order_key AND e.status <> 1 AND e.status < 5 OFFSET 0) FOR UPDATE OF k SKIP LOCKED) AND updated_at < $4",
			"DELETE FROM \"outbox_event_key\" WHERE order_key IN (SELECT k.order_key FROM \"outbox_event_key\" k WHERE k.order_key > $1 AND k.updated_at < $2 AND NOT EXISTS (SELECT 1 FROM \"outbox_event\" e WHERE e.order_key = k.order_key AND e.status <> 1 AND e.status < 5 OFFSET 0) FOR UPDATE OF k SKIP LOCKED) AND updated_at < $3",
			"INSERT INTO \"outbox_event\" (event_id, event_type, aggregate_type, aggregate_id, tenant_id, payload, headers, status, attempts, available_at, created_at, order_key, order_seq) " +
				"SELECT u.event_id, u.event_type, u.aggregate_type, u.aggregate_id, u.tenant_id, u.payload, u.headers, u.status, 0, u.available_at, u.created_at, u.order_key, u.order_seq " +
				"FROM unnest(CAST($1 AS TEXT[]), CAST($2 AS TEXT[]), CAST($3 AS TEXT[]), CAST($4 AS TEXT[]), CAST($5 AS TEXT[]), CAST($6 AS JSONB[]), CAST($7 AS JSONB[]), CAST($8 AS SMALLINT[]), " +
				"CAST($9 AS TIMESTAMPTZ[]), CAST($10 AS TIMESTAMPTZ[]), CAST($11 AS TEXT[]), CAST($12 AS BIGINT[])) " +
				"AS u (event_id, event_type, aggregate_type, aggregate_id, tenant_id, payload, headers, status, available_at, created_at, order_key, order_seq) ON CONFLICT (event_id) DO NOTHING RETURNING event_id, status",
			"WITH ks AS (INSERT INTO \"outbox_event_key\" AS k (order_key, last_seq, updated_at) VALUES ($1, $2, statement_timestamp()), ($3, $4, statement_timestamp()) ON CONFLICT (order_key) DO UPDATE SET last_seq = k.last_seq + excluded.last_seq, updated_at = excluded.updated_at WHERE (k.last_seq, k.updated_at) = (SELECT s.last_seq, s.updated_at FROM \"outbox_event_key\" s WHERE s.order_key = excluded.order_key) RETURNING order_key, last_seq) INSERT INTO \"outbox_event\" (event_id, event_type, aggregate_type, aggregate_id, tenant_id, payload, headers, status, attempts, available_at, created_at, locked_by, locked_until, order_key, order_seq) SELECT v.event_id, v.event_type, v.aggregate_type, v.aggregate_id, v.tenant_id, v.payload, v.headers, v.status, v.attempts, v.available_at, v.created_at, v.locked_by, v.locked_until, v.order_key, ks.last_seq - v.order_seq FROM (VALUES (CAST($5 AS TEXT), CAST($6 AS TEXT), CAST($7 AS TEXT), CAST($8 AS TEXT), CAST($9 AS TEXT), CAST($10 AS JSONB), CAST($11 AS JSONB), CASE WHEN EXISTS (SELECT 1 FROM \"outbox_event\" WHERE order_key = $12 AND status <> 1 AND status < 5) THEN 4 ELSE 0 END, 0, CAST($13 AS TIMESTAMPTZ), CAST($14 AS TIMESTAMPTZ), CAST(NULL AS TEXT), CAST(NULL AS TIMESTAMPTZ), CAST($15 AS TEXT), CAST($16 AS BIGINT)), (CAST($17 AS TEXT), CAST($18 AS TEXT), CAST($19 AS TEXT), CAST($20 AS TEXT), CAST($21 AS TEXT), CAST($22 AS JSONB), CAST($23 AS JSONB), CASE WHEN EXISTS (SELECT 1 FROM \"outbox_event\" WHERE order_key = $24 AND status <> 1 AND status < 5) THEN 4 ELSE 0 END, 0, CAST($25 AS TIMESTAMPTZ), CAST($26 AS TIMESTAMPTZ), CASE WHEN EXISTS (SELECT 1 FROM \"outbox_event\" WHERE order_key = $27 AND status <> 1 AND status < 5) THEN NULL ELSE $28 END, CASE WHEN EXISTS (SELECT 1 FROM \"outbox_event\" WHERE order_key = $29 AND status <> 1 AND status < 5) THEN NULL ELSE statement_timestamp() + CAST($30 AS BIGINT) * INTERVAL '1 microsecond' END, CAST($31 AS TEXT), CAST($32 AS BIGINT)), (CAST($33 AS TEXT), CAST($34 AS TEXT), CAST($35 AS TEXT), CAST($36 AS TEXT), CAST($37 AS TEXT), CAST($38 AS JSONB), CAST($39 AS JSONB), 4, 0, CAST($40 AS TIMESTAMPTZ), CAST($41 AS TIMESTAMPTZ), CAST(NULL AS TEXT), CAST(NULL AS TIMESTAMPTZ), CAST($42 AS TEXT), CAST($43 AS BIGINT))) AS v (event_id, event_type, aggregate_type, aggregate_id, tenant_id, payload, headers, status, attempts, available_at, created_at, locked_by, locked_until, order_key, order_seq) JOIN ks ON ks.order_key = v.order_key ON CONFLICT (event_id) DO NOTHING RETURNING event_id, status, order_seq",
		},
		"mysql": {
			"SELECT k.order_key, k.last_seq, TIMESTAMPDIFF(MICROSECOND, '2000-01-01 00:00:00', k.updated_at), EXISTS (SELECT 1 FROM `outbox_event` e FORCE INDEX (`outbox_event_order_idx`) WHERE e.order_open_key = k.order_key) FROM `outbox_event_key` k WHERE k.order_key IN (?, ?)",
			"INSERT INTO `outbox_event_key` (order_key, last_seq, updated_at) VALUES (?, ?, UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE last_seq = LAST_INSERT_ID((last_seq + VALUES(last_seq)) * 2 + (last_seq <=> ? AND TIMESTAMPDIFF(MICROSECOND, '2000-01-01 00:00:00', updated_at) <=> ?)) DIV 2, updated_at = VALUES(updated_at)",
			"INSERT INTO `outbox_event_key` (order_key, last_seq, updated_at) VALUES (?, ?, UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE last_seq = LAST_INSERT_ID((last_seq + VALUES(last_seq)) * 2 + (last_seq <=> ? AND TIMESTAMPDIFF(MICROSECOND, '2000-01-01 00:00:00', updated_at) <=> ?)) DIV 2, updated_at = VALUES(updated_at)",
			"SELECT w.event_id FROM (SELECT (SELECT f.event_id FROM `outbox_event` f FORCE INDEX (`outbox_event_order_idx`) WHERE f.order_open_key = k.order_key ORDER BY f.order_seq LIMIT 1) AS id FROM `outbox_event_key` k WHERE k.order_key IN (?, ?)) h JOIN `outbox_event` w ON w.event_id = h.id WHERE w.status = 4 AND NOT EXISTS (SELECT 1 FROM `outbox_event` a FORCE INDEX (`outbox_event_order_idx`) WHERE a.order_open_key = w.order_open_key AND a.status IN (0, 2, 3)) LIMIT ?",
			"SELECT p.event_id, NULL, NULL, NULL FROM (SELECT w.event_id FROM (SELECT (SELECT f.event_id FROM `outbox_event` f FORCE INDEX (`outbox_event_order_idx`) WHERE f.order_open_key = k.order_key ORDER BY f.order_seq LIMIT 1) AS id FROM `outbox_event_key` k WHERE k.order_key IN (?, ?)) h JOIN `outbox_event` w ON w.event_id = h.id WHERE w.status = 4 AND NOT EXISTS (SELECT 1 FROM `outbox_event` a FORCE INDEX (`outbox_event_order_idx`) WHERE a.order_open_key = w.order_open_key AND a.status IN (0, 2, 3)) LIMIT ?) p UNION ALL SELECT NULL, k.order_key, k.last_seq, TIMESTAMPDIFF(MICROSECOND, '2000-01-01 00:00:00', k.updated_at) FROM `outbox_event_key` k WHERE k.order_key IN (?, ?) AND NOT EXISTS (SELECT 1 FROM `outbox_event` e FORCE INDEX (`outbox_event_order_idx`) WHERE e.order_open_key = k.order_key)",
			"SELECT w.event_id FROM `outbox_event` w WHERE w.order_open_key IS NOT NULL AND w.status = 4 AND w.order_seq = (SELECT MIN(m.order_seq) FROM `outbox_event` m FORCE INDEX (`outbox_event_order_idx`) WHERE m.order_open_key = w.order_open_key AND m.status = 4) AND NOT EXISTS (SELECT 1 FROM `outbox_event` a FORCE INDEX (`outbox_event_order_idx`) WHERE a.order_open_key = w.order_open_key AND a.status IN (0, 2)) LIMIT ?",
			"UPDATE `outbox_event` FORCE INDEX (PRIMARY) SET status = 0, available_at = GREATEST(available_at, UTC_TIMESTAMP(6)), locked_by = ?, locked_until = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND WHERE event_id IN (?, ?) AND status = 4",
			"SELECT order_key FROM `outbox_event_key` WHERE order_key > ? ORDER BY order_key LIMIT 1 OFFSET ?",
			"DELETE FROM `outbox_event_key` WHERE order_key > ? AND order_key <= ? AND updated_at < ? AND NOT EXISTS (SELECT 1 FROM `outbox_event` e WHERE e.order_open_key = `outbox_event_key`.order_key)",
			"DELETE FROM `outbox_event_key` WHERE order_key > ? AND updated_at < ? AND NOT EXISTS (SELECT 1 FROM `outbox_event` e WHERE e.order_open_key = `outbox_event_key`.order_key)",
			"INSERT INTO `outbox_event` (event_id, event_type, aggregate_type, aggregate_id, tenant_id, payload, headers, status, attempts, available_at, created_at, order_key, order_seq) VALUES (?, ?, ?, ?, ?, ?, ?, 4, 0, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?, NULL, NULL)",
		},
		"sqlite": {
			"INSERT INTO \"outbox_event_key\" (order_key, last_seq, updated_at) VALUES (?, ?, ?), (?, ?, ?) ON CONFLICT (order_key) DO UPDATE SET last_seq = last_seq RETURNING order_key, last_seq, (SELECT max(e.order_seq) FROM \"outbox_event\" e WHERE e.order_key = \"outbox_event_key\".order_key AND e.status <> 1 AND e.status < 5)",
			"UPDATE \"outbox_event\" SET status = 0, available_at = MAX(available_at, strftime('%Y-%m-%dT%H:%M:%f000Z', 'now')) WHERE event_id IN (SELECT w.event_id FROM (SELECT (SELECT f.event_id FROM \"outbox_event\" f WHERE f.order_key = k.order_key AND f.status <> 1 AND f.status < 5 ORDER BY f.order_seq LIMIT 1) AS id FROM \"outbox_event_key\" k WHERE k.order_key IN (?, ?)) h JOIN \"outbox_event\" w ON w.event_id = h.id WHERE w.status = 4 AND NOT EXISTS (SELECT 1 FROM \"outbox_event\" a WHERE a.order_key = w.order_key AND a.status <> 1 AND a.status < 5 AND a.status IN (0, 2, 3)) LIMIT 2) AND status = 4",
			"UPDATE \"outbox_event\" SET status = 0, available_at = MAX(available_at, strftime('%Y-%m-%dT%H:%M:%f000Z', 'now')) WHERE event_id IN (SELECT w.event_id FROM \"outbox_event\" w WHERE w.order_key IS NOT NULL AND w.status <> 1 AND w.status < 5 AND w.status = 4 AND w.order_seq = (SELECT MIN(m.order_seq) FROM \"outbox_event\" m WHERE m.order_key = w.order_key AND m.status <> 1 AND m.status < 5 AND m.status = 4) AND NOT EXISTS (SELECT 1 FROM \"outbox_event\" a WHERE a.order_key = w.order_key AND a.status <> 1 AND a.status < 5 AND a.status IN (0, 2)) LIMIT 100) AND status = 4",
			"UPDATE \"outbox_event\" SET status = 0, available_at = MAX(available_at, strftime('%Y-%m-%dT%H:%M:%f000Z', 'now')), locked_by = ?, locked_until = strftime('%Y-%m-%dT%H:%M:%f000Z', 'now', ?) WHERE event_id IN (?, ?) AND status = 4",
			"SELECT order_key FROM \"outbox_event_key\" WHERE order_key > ? ORDER BY order_key LIMIT 1 OFFSET ?",
			"DELETE FROM \"outbox_event_key\" WHERE order_key IN (SELECT k.order_key FROM \"outbox_event_key\" k WHERE k.order_key > ? AND k.order_key <= ? AND k.updated_at < ? AND NOT EXISTS (SELECT 1 FROM \"outbox_event\" e WHERE e.order_key = k.order_key AND e.status <> 1 AND e.status < 5)) AND updated_at < ?",
			"DELETE FROM \"outbox_event_key\" WHERE order_key IN (SELECT k.order_key FROM \"outbox_event_key\" k WHERE k.order_key > ? AND k.updated_at < ? AND NOT EXISTS (SELECT 1 FROM \"outbox_event\" e WHERE e.order_key = k.order_key AND e.status <> 1 AND e.status < 5)) AND updated_at < ?",
			"INSERT INTO \"outbox_event\" (event_id, event_type, aggregate_type, aggregate_id, tenant_id, payload, headers, status, attempts, available_at, created_at, order_key, order_seq) VALUES (?, ?, ?, ?, ?, ?, ?, 4, 0, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?, NULL, NULL)",
		},
	}
	for _, d := range allDialects {
		var got []string
		qs := orderGoldenQueries(d)
		for _, q := range qs {
			got = append(got, q.SQL)
		}
		if !reflect.DeepEqual(got, want[d.Name()]) {
			t.Errorf("%s:\n got: %q\nwant: %q", d.Name(), got, want[d.Name()])
		}
		// SQLite's key upsert binds updated_at: the time it was given (in a zone two
		// hours east of UTC), in UTC, in the form of the table's other times. It
		// inserts a new key's row at 0 and changes no existing row (sqliteOrder).
		if d == SQLite {
			wantArgs := []any{"A", int64(0), goldenT0S, "B", int64(0), goldenT0S}
			if !reflect.DeepEqual(qs[0].Args, wantArgs) {
				t.Errorf("sqlite key upsert args\n got: %#v\nwant: %#v", qs[0].Args, wantArgs)
			}
		}
	}
}
