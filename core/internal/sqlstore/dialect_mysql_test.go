package sqlstore

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// Builder tests of what only the MySQL dialect does; its golden SQL is with the other
// dialects' in dialect_test.go.

func TestMySQLDDL(t *testing.T) {
	t.Parallel()
	dd := MySQL
	m := dd.ddl(dd, tableName{schema: "app", name: "Events"})
	want := "CREATE TABLE IF NOT EXISTS `app`.`Events` (\n" +
		"    event_id       VARBINARY(64) NOT NULL PRIMARY KEY,\n" +
		"    event_type     VARCHAR(128)  NOT NULL,\n" +
		"    aggregate_type VARCHAR(64)   NOT NULL,\n" +
		"    aggregate_id   VARCHAR(128)  NULL,\n" +
		"    tenant_id      VARCHAR(64)   NULL,\n" +
		"    payload        JSON          NOT NULL,\n" +
		"    headers        JSON          NULL,\n" +
		"    status         SMALLINT      NOT NULL DEFAULT 0,\n" +
		"    attempts       INTEGER       NOT NULL DEFAULT 0,\n" +
		"    last_error     TEXT          NULL,\n" +
		"    available_at   DATETIME(6)   NOT NULL,\n" +
		"    created_at     DATETIME(6)   NOT NULL,\n" +
		"    done_at        DATETIME(6)   NULL,\n" +
		"    locked_by      VARCHAR(128)  NULL,\n" +
		"    locked_until   DATETIME(6)   NULL,\n" +
		"    due_at         DATETIME(6)   AS (CASE WHEN status IN (0, 2) THEN available_at END) STORED,\n" +
		"    finished_at    DATETIME(6)   AS (CASE WHEN status IN (1, 3) THEN COALESCE(done_at, created_at) END) STORED,\n" +
		"    INDEX `Events_pending_idx` (due_at, created_at),\n" +
		"    INDEX `Events_dead_idx` (status, created_at, event_id),\n" +
		"    INDEX `Events_finished_idx` (finished_at, event_id)\n" +
		") ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin"
	if len(m.up) != 1 || m.up[0].sql != want {
		t.Errorf("up:\n got: %q\nwant: %q", m.up, want)
	}
	if len(m.down) != 1 || m.down[0].sql != "DROP TABLE IF EXISTS `app`.`Events`" {
		t.Errorf("down: %q", m.down)
	}
}

func TestMySQLTimeEncoding(t *testing.T) {
	t.Parallel()
	d := MySQL
	got, err := d.time(goldenT0)
	if err != nil || got != goldenT0U {
		t.Errorf("time(%v) = %#v, %v; want %v", goldenT0, got, err, goldenT0U)
	}
	for _, ok := range []time.Time{
		time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
	} {
		if _, err := d.time(ok); err != nil {
			t.Errorf("time(%v): %v", ok, err)
		}
	}
	for _, bad := range []time.Time{
		{}, time.Date(999, 12, 31, 23, 59, 59, 0, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		if _, err := d.time(bad); err == nil {
			t.Errorf("time(%v) encoded without error", bad)
		}
	}
	// Out-of-range times fail the builder, not the database.
	if _, err := d.pendingQuery(goldenTable, storage.PendingParams{Now: time.Date(1000, 6, 1, 0, 0, 0, 0, time.UTC), SkipRecent: 365 * 24 * time.Hour, Limit: 1}); err == nil {
		t.Error("pending query before year 1000 built")
	}
}

func TestInsertSplitsAtStatementBytes(t *testing.T) {
	t.Parallel()
	big := json.RawMessage(`"` + strings.Repeat("x", 1<<20-2) + `"`) // 1 MiB
	events := make([]outboxtype.Event, 10)
	for i := range events {
		events[i] = outboxtype.Event{ID: strconv.Itoa(i), Type: "T", AggregateType: "A", Payload: big, CreatedAt: goldenT0}
	}
	events[9].Payload = json.RawMessage(`"` + strings.Repeat("y", 5<<20) + `"`) // larger than the bound: alone
	qs, err := MySQL.insertQueries(goldenTable, storage.InsertParams{Events: events}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var rows []int
	for _, q := range qs {
		rows = append(rows, len(q.Args)/insertParamsPerRow)
	}
	// 4 MiB holds three 1 MiB rows and their other columns, not four.
	if fmt.Sprint(rows) != "[3 3 3 1]" {
		t.Errorf("rows per statement %v, want [3 3 3 1]", rows)
	}
	if qs[3].Args[0] != "9" {
		t.Errorf("last statement starts with %v", qs[3].Args[0])
	}
	// PostgreSQL has no such bound.
	if qs, err := Postgres.insertQueries(goldenTable, storage.InsertParams{Events: events}, time.Time{}); err != nil || len(qs) != 1 {
		t.Errorf("postgres: %d statements, %v", len(qs), err)
	}
}
