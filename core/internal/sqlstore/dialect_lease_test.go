package sqlstore

import (
	"reflect"
	"testing"
	"time"

	"github.com/outboxkit/outbox/core/storage"
)

// TestLeaseGoldenSQL: the exact statements of the dispatch lease on each dialect. Every
// time they compare or write is the database's; the arguments are the holder, its mode
// and durations.
func TestLeaseGoldenSQL(t *testing.T) {
	t.Parallel()
	tbl := tableName{schema: "app", name: "outbox_event"}
	build := func(d *dialect, name string) query {
		switch name {
		case "acquire SingleNode":
			return d.leaseAcquireQuery(tbl, storage.LeaseParams{Holder: "h", TTL: 30 * time.Second})
		case "acquire MultiNode":
			return d.leaseAcquireQuery(tbl, storage.LeaseParams{Holder: "m", Shared: true, TTL: 30 * time.Second})
		case "insert":
			return d.leaseInsertQuery(tbl, storage.LeaseParams{Holder: "h", TTL: 30 * time.Second})
		case "read":
			return d.leaseReadQuery(tbl)
		default:
			return d.leaseReleaseQuery(tbl, "h")
		}
	}
	for _, tc := range []struct {
		d    *dialect
		name string
		sql  string
		args []any
	}{
		{postgresDialect, "acquire SingleNode", "UPDATE \"app\".\"outbox_event_lease\" SET acquired_at = CASE WHEN expires_at < statement_timestamp() THEN statement_timestamp() ELSE acquired_at END, holder = $1, holder_mode = $2, expires_at = statement_timestamp() + CAST($3 AS BIGINT) * INTERVAL '1 microsecond' WHERE name = 'dispatch' AND (expires_at < statement_timestamp() OR holder = $4 AND holder_mode = $5)",
			[]any{"h", "SingleNode", int64(30000000), "h", "SingleNode"}},
		{postgresDialect, "acquire MultiNode", "UPDATE \"app\".\"outbox_event_lease\" SET acquired_at = CASE WHEN expires_at < statement_timestamp() THEN statement_timestamp() ELSE acquired_at END, holder = $1, holder_mode = $2, expires_at = CASE WHEN expires_at > statement_timestamp() + CAST($3 AS BIGINT) * INTERVAL '1 microsecond' THEN expires_at ELSE statement_timestamp() + CAST($4 AS BIGINT) * INTERVAL '1 microsecond' END WHERE name = 'dispatch' AND (expires_at < statement_timestamp() OR holder_mode = $5)",
			[]any{"m", "MultiNode", int64(30000000), int64(30000000), "MultiNode"}},
		{postgresDialect, "insert", "INSERT INTO \"app\".\"outbox_event_lease\" (name, holder, holder_mode, acquired_at, expires_at) VALUES ('dispatch', $1, $2, statement_timestamp(), statement_timestamp() + CAST($3 AS BIGINT) * INTERVAL '1 microsecond') ON CONFLICT (name) DO NOTHING",
			[]any{"h", "SingleNode", int64(30000000)}},
		{postgresDialect, "read", "SELECT holder, holder_mode, expires_at, statement_timestamp() FROM \"app\".\"outbox_event_lease\" WHERE name = 'dispatch'",
			nil},
		{postgresDialect, "release", "UPDATE \"app\".\"outbox_event_lease\" SET expires_at = statement_timestamp() + CAST($1 AS BIGINT) * INTERVAL '1 microsecond' WHERE name = 'dispatch' AND holder = $2 AND holder_mode = $3",
			[]any{int64(-1000000), "h", "SingleNode"}},
		{mysqlDialect, "acquire SingleNode", "UPDATE `app`.`outbox_event_lease` SET acquired_at = CASE WHEN expires_at < UTC_TIMESTAMP(6) THEN UTC_TIMESTAMP(6) ELSE acquired_at END, holder = ?, holder_mode = ?, expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND WHERE name = 'dispatch' AND (expires_at < UTC_TIMESTAMP(6) OR holder = ? AND holder_mode = ?)",
			[]any{"h", "SingleNode", int64(30000000), "h", "SingleNode"}},
		{mysqlDialect, "acquire MultiNode", "UPDATE `app`.`outbox_event_lease` SET acquired_at = CASE WHEN expires_at < UTC_TIMESTAMP(6) THEN UTC_TIMESTAMP(6) ELSE acquired_at END, holder = ?, holder_mode = ?, expires_at = CASE WHEN expires_at > UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND THEN expires_at ELSE UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND END WHERE name = 'dispatch' AND (expires_at < UTC_TIMESTAMP(6) OR holder_mode = ?)",
			[]any{"m", "MultiNode", int64(30000000), int64(30000000), "MultiNode"}},
		{mysqlDialect, "insert", "INSERT INTO `app`.`outbox_event_lease` (name, holder, holder_mode, acquired_at, expires_at) VALUES ('dispatch', ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) ON DUPLICATE KEY UPDATE name = name",
			[]any{"h", "SingleNode", int64(30000000)}},
		{mysqlDialect, "read", "SELECT holder, holder_mode, expires_at, UTC_TIMESTAMP(6) FROM `app`.`outbox_event_lease` WHERE name = 'dispatch'",
			nil},
		{mysqlDialect, "release", "UPDATE `app`.`outbox_event_lease` SET expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND WHERE name = 'dispatch' AND holder = ? AND holder_mode = ?",
			[]any{int64(-1000000), "h", "SingleNode"}},
		{sqliteDialect, "acquire SingleNode", "UPDATE \"app\".\"outbox_event_lease\" SET acquired_at = CASE WHEN expires_at < strftime('%Y-%m-%dT%H:%M:%f000Z', 'now') THEN strftime('%Y-%m-%dT%H:%M:%f000Z', 'now') ELSE acquired_at END, holder = ?, holder_mode = ?, expires_at = strftime('%Y-%m-%dT%H:%M:%f000Z', 'now', ?) WHERE name = 'dispatch' AND (expires_at < strftime('%Y-%m-%dT%H:%M:%f000Z', 'now') OR holder = ? AND holder_mode = ?)",
			[]any{"h", "SingleNode", "+30.000000 seconds", "h", "SingleNode"}},
		{sqliteDialect, "acquire MultiNode", "UPDATE \"app\".\"outbox_event_lease\" SET acquired_at = CASE WHEN expires_at < strftime('%Y-%m-%dT%H:%M:%f000Z', 'now') THEN strftime('%Y-%m-%dT%H:%M:%f000Z', 'now') ELSE acquired_at END, holder = ?, holder_mode = ?, expires_at = CASE WHEN expires_at > strftime('%Y-%m-%dT%H:%M:%f000Z', 'now', ?) THEN expires_at ELSE strftime('%Y-%m-%dT%H:%M:%f000Z', 'now', ?) END WHERE name = 'dispatch' AND (expires_at < strftime('%Y-%m-%dT%H:%M:%f000Z', 'now') OR holder_mode = ?)",
			[]any{"m", "MultiNode", "+30.000000 seconds", "+30.000000 seconds", "MultiNode"}},
		{sqliteDialect, "insert", "INSERT INTO \"app\".\"outbox_event_lease\" (name, holder, holder_mode, acquired_at, expires_at) VALUES ('dispatch', ?, ?, strftime('%Y-%m-%dT%H:%M:%f000Z', 'now'), strftime('%Y-%m-%dT%H:%M:%f000Z', 'now', ?)) ON CONFLICT (name) DO NOTHING",
			[]any{"h", "SingleNode", "+30.000000 seconds"}},
		{sqliteDialect, "read", "SELECT holder, holder_mode, expires_at, strftime('%Y-%m-%dT%H:%M:%f000Z', 'now') FROM \"app\".\"outbox_event_lease\" WHERE name = 'dispatch'",
			nil},
		{sqliteDialect, "release", "UPDATE \"app\".\"outbox_event_lease\" SET expires_at = strftime('%Y-%m-%dT%H:%M:%f000Z', 'now', ?) WHERE name = 'dispatch' AND holder = ? AND holder_mode = ?",
			[]any{"-1.000000 seconds", "h", "SingleNode"}},
	} {
		q := build(tc.d, tc.name)
		if q.SQL != tc.sql {
			t.Errorf("%s %s:\ngot  %s\nwant %s", tc.d.name, tc.name, q.SQL, tc.sql)
		}
		if !reflect.DeepEqual(q.Args, tc.args) {
			t.Errorf("%s %s: args %#v, want %#v", tc.d.name, tc.name, q.Args, tc.args)
		}
	}
}
