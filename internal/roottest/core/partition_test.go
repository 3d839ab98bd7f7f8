package outbox_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	outboxpartition "github.com/outboxkit/outbox/core/partition"
	"github.com/outboxkit/outbox/core/storage"
	"github.com/outboxkit/outbox/core/storetest"
	"github.com/outboxkit/outbox/internal/testdb"
)

// The prototype of a PostgreSQL outbox table partitioned by event ID (the
// partition-spike branch): the conformance suite on it, and its maintenance.

// testPeriod is the partition period of the tests.
const testPeriod = 24 * time.Hour

// ulidAt returns an ID of the millisecond of at, n its random part: a ULID as the
// partitioned table sorts it.
func ulidAt(at time.Time, n int) string {
	const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	ms := at.UnixMilli()
	var b [10]byte
	for i := 9; i >= 0; i-- {
		b[i] = crockford[ms&31]
		ms >>= 5
	}
	return string(b[:]) + fmt.Sprintf("%016d", n)
}

// day is the start of the UTC day of at plus n days.
func day(at time.Time, n int) time.Time {
	return at.UTC().Truncate(testPeriod).Add(time.Duration(n) * testPeriod)
}

// partitionName is the name of the partition of table (schema.table) for the day that
// starts at start.
func partitionName(table string, start time.Time) string {
	_, name, _ := strings.Cut(table, ".")
	return name + "_p" + start.Format("2006010215")
}

// setupPartitioned migrates a partitioned table whose partitions are the days from
// first to last (offsets from today); with everyID, also the partitions from MINVALUE
// to the first and from the last to MAXVALUE, so that every ID has a partition.
func setupPartitioned(t *testing.T, first, last int, everyID bool) sqlBundle {
	t.Helper()
	ctx := t.Context()
	db := testdb.NewPostgresDB(t)
	table := testdb.IsolatedTable(t, db, outbox.Postgres.Name())
	now := time.Now()
	cfg := outboxpartition.Config{Period: testPeriod, Ahead: last - first}
	if err := outboxpartition.Migrate(ctx, db, table, cfg, day(now, first)); err != nil {
		t.Fatalf("MigratePartitionedTable: %v", err)
	}
	if everyID {
		// The IDs of the suite ("a1", "d", "e00001", "t1", …) spread over several
		// partitions, so that its lists and claims read across partitions.
		q := quoteTable(outbox.Postgres, table)
		bounds := []string{"MINVALUE", "'" + ulidAt(day(now, first), 0) + "'", "'" + ulidAt(day(now, last+1), 0) + "'", "'b'", "'e'", "'n'", "'t'", "MAXVALUE"}
		for i := range len(bounds) - 1 {
			if i == 1 {
				continue // the days
			}
			s := `CREATE TABLE ` + quoteTable(outbox.Postgres, table+"_other"+strconv.Itoa(i)) + ` PARTITION OF ` + q +
				` FOR VALUES FROM (` + bounds[i] + `) TO (` + bounds[i+1] + `)`
			if _, err := db.ExecContext(ctx, s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
	}
	s, err := sqlStore(db, outbox.Postgres, outbox.SQLStoreConfig{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	return sqlBundle{db: db, d: outbox.Postgres, table: table, store: s}
}

// TestSQLStoreConformancePartitioned runs the conformance suite on a partitioned table
// whose partitions hold every ID (the suite's IDs are not ULIDs: "a", "d1", …), so that
// it checks the SQL on a partitioned table. With OUTBOX_TEST_PARTITION_STRICT set it
// runs it on the time partitions alone too, where every write of an ID that is not a
// ULID of those days is refused.
func TestSQLStoreConformancePartitioned(t *testing.T) {
	t.Parallel()
	for _, everyID := range []bool{true, false} {
		name := map[bool]string{true: "every-id", false: "time-partitions-only"}[everyID]
		t.Run(name, func(t *testing.T) {
			if !everyID && os.Getenv("OUTBOX_TEST_PARTITION_STRICT") == "" {
				t.Skip("set OUTBOX_TEST_PARTITION_STRICT to run the suite on time partitions alone: most of its IDs are refused")
			}
			t.Parallel()
			storetest.Run(t, storetest.Features{}, func(t *testing.T) storetest.Harness {
				b := setupPartitioned(t, -1, 2, everyID)
				if err := outbox.MigrateAggregateIndex(t.Context(), b.db, b.d, b.table); err != nil {
					t.Fatal(err)
				}
				return storetest.Harness{Store: b.store, DB: b.db}
			})
		})
	}
}

// TestPartitionedWritesRefused: an ID that is not a ULID, or whose day has no
// partition, is refused with ErrInvalidArgument before the INSERT, so that the
// caller's transaction goes on; a partition created since the store read them is
// found.
func TestPartitionedWritesRefused(t *testing.T) {
	t.Parallel()
	b := setupPartitioned(t, 0, 1, false)
	ctx := t.Context()
	now := time.Now()
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for _, id := range []string{"not-a-ulid", ulidAt(day(now, -3), 1), ulidAt(day(now, 5), 1)} {
		_, err := b.store.Insert(ctx, tx, storage.InsertParams{Events: []outbox.Event{testEvent(id, now)}})
		if !errors.Is(err, outbox.ErrInvalidArgument) {
			t.Errorf("Insert(%s) = %v, want ErrInvalidArgument", id, err)
		}
	}
	ok := ulidAt(now, 1)
	if _, err := b.store.Insert(ctx, tx, storage.InsertParams{Events: []outbox.Event{testEvent(ok, now), testEvent(ok+".fanout", now)}}); err != nil {
		t.Fatalf("Insert after the refusals, in the same transaction: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	rep, err := outboxpartition.Maintain(ctx, b.db, b.table, outboxpartition.Maintenance{
		Config: outboxpartition.Config{Period: testPeriod, Ahead: 5}, Now: now, Purge: storage.PurgeParams{Before: now.Add(-time.Hour)}})
	if err != nil || len(rep.Created) != 4 {
		t.Fatalf("MaintainPartitions = %+v, %v; want 4 partitions created", rep, err)
	}
	later := ulidAt(day(now, 5), 1)
	if _, err := b.store.Insert(ctx, b.db, storage.InsertParams{Events: []outbox.Event{testEvent(later, now)}}); err != nil {
		t.Fatalf("Insert into a partition created since: %v", err)
	}
}

// partitionRow is a row the maintenance test writes: its ID's day (an offset from
// today), and what it then is.
type partitionRow struct {
	day    int
	status outbox.Status
	// finished is when it became DONE or DEAD, as an offset from now.
	finished time.Duration
}

// TestMaintainPartitions: a partition with a pending row, a DEAD row its cutoff keeps
// (replayable) or a recent DONE row is kept; one whose rows the purge would all delete
// is detached and dropped, and so is an empty one; a replay racing the drop fails; a
// freeze that waits for a writer's lock gives up and leaves the partition.
func TestMaintainPartitions(t *testing.T) {
	t.Parallel()
	b := setupPartitioned(t, -12, 2, false)
	ctx := t.Context()
	now := time.Now()
	rows := map[string]partitionRow{
		"old-done":       {day: -10, status: outbox.StatusDone, finished: -10 * testPeriod},
		"old-dead":       {day: -10, status: outbox.StatusDead, finished: -10 * testPeriod},
		"replayable":     {day: -9, status: outbox.StatusDead, finished: -9 * testPeriod},
		"pending":        {day: -8, status: outbox.StatusNew},
		"recent-done":    {day: -7, status: outbox.StatusDone, finished: -time.Hour},
		"raced":          {day: -11, status: outbox.StatusDead, finished: -11 * testPeriod},
		"today-done":     {day: 0, status: outbox.StatusDone, finished: -5 * testPeriod},
		"done-in-period": {day: -6, status: outbox.StatusDone, finished: -5 * testPeriod},
	}
	id := map[string]string{}
	for name, r := range rows {
		id[name] = ulidAt(day(now, r.day).Add(time.Hour), len(id))
		created := day(now, r.day).Add(time.Hour)
		if _, err := b.store.Insert(ctx, b.db, storage.InsertParams{Events: []outbox.Event{testEvent(id[name], created)}}); err != nil {
			t.Fatalf("insert %s: %v", name, err)
		}
		switch r.status {
		case outbox.StatusDone:
			if _, err := b.store.MarkDone(ctx, storage.MarkDoneParams{IDs: []string{id[name]}, DoneAt: now.Add(r.finished)}); err != nil {
				t.Fatal(err)
			}
		case outbox.StatusDead:
			if _, err := b.store.MarkDead(ctx, storage.MarkDeadParams{ID: id[name], DeadAt: now.Add(r.finished), Reason: "x"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	name := func(d int) string { return partitionName(b.table, day(now, d)) }
	purge := storage.PurgeParams{Before: now.Add(-3 * testPeriod), DeadBefore: day(now, -9)}

	var raced error
	rep, err := outboxpartition.Maintain(ctx, b.db, b.table, outboxpartition.Maintenance{
		Config: outboxpartition.Config{Period: testPeriod, Ahead: 3}, Now: now, Purge: purge,
		AfterFreeze: func(p string) {
			if p != name(-11) {
				return
			}
			// The replay of a row of a frozen partition fails: the row stays DEAD and
			// goes with the partition.
			_, raced = b.store.Replay(ctx, storage.ReplayParams{IDs: []string{id["raced"]}, Now: now})
		},
	})
	if err != nil {
		t.Fatalf("MaintainPartitions: %v", err)
	}
	t.Logf("report: %+v", rep)
	if raced == nil || !strings.Contains(raced.Error(), "23514") {
		t.Errorf("a replay in a frozen partition = %v, want a check violation (SQLSTATE 23514)", raced)
	}
	want := outboxpartition.Report{
		Created: []string{name(3)},
		Dropped: []string{name(-12), name(-11), name(-10), name(-6), name(-5), name(-4)},
		Kept:    []string{name(-9), name(-8), name(-7)},
	}
	for _, c := range []struct {
		what      string
		got, want []string
	}{{"created", rep.Created, want.Created}, {"dropped", rep.Dropped, want.Dropped}, {"kept", rep.Kept, want.Kept}, {"busy", rep.Busy, nil}} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s %v, want %v", c.what, c.got, c.want)
		}
	}
	for n, r := range rows {
		_, err := b.store.Get(ctx, id[n])
		gone := slices.Contains(rep.Dropped, name(r.day))
		if gone != errors.Is(err, outbox.ErrNotFound) || !gone && err != nil {
			t.Errorf("%s (partition %s, dropped %v): Get = %v", n, name(r.day), gone, err)
		}
	}
	if _, err := b.store.Insert(ctx, b.db, storage.InsertParams{Events: []outbox.Event{testEvent(ulidAt(day(now, -10), 99), now)}}); !errors.Is(err, outbox.ErrInvalidArgument) {
		t.Errorf("Insert into a dropped partition's day = %v, want ErrInvalidArgument", err)
	}

	// A writer's transaction holds the -8 partition's pending row: the freeze gives up
	// after its lock timeout. (A detach would wait for that
	// transaction: DETACH … CONCURRENTLY waits for every transaction that holds a lock on
	// the table.)
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `UPDATE `+b.quoted()+` SET attempts = 1 WHERE event_id = $1`, id["pending"]); err != nil {
		t.Fatal(err)
	}
	rep, err = outboxpartition.Maintain(ctx, b.db, b.table, outboxpartition.Maintenance{
		Config: outboxpartition.Config{Period: testPeriod, Ahead: 3}, Now: now, Purge: purge, LockTimeout: 200 * time.Millisecond})
	if err != nil || !slices.Equal(rep.Busy, []string{name(-8)}) || len(rep.Dropped) > 0 {
		t.Fatalf("MaintainPartitions with the -8 row held = %+v, %v; want it busy, nothing dropped", rep, err)
	}

	// Once the writer rolled back, and with the undelivered rows' cutoff, the -8
	// partition goes too.
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	purge.UndeliveredBefore = now.Add(-7 * testPeriod)
	rep, err = outboxpartition.Maintain(ctx, b.db, b.table, outboxpartition.Maintenance{
		Config: outboxpartition.Config{Period: testPeriod, Ahead: 3}, Now: now, Purge: purge})
	if err != nil {
		t.Fatalf("MaintainPartitions again: %v", err)
	}
	if !slices.Equal(rep.Dropped, []string{name(-8)}) || !slices.Equal(rep.Kept, []string{name(-9), name(-7)}) {
		t.Errorf("third run: %+v, want -8 dropped, -9 and -7 kept", rep)
	}
	var left int
	if err := b.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_inherits WHERE inhparent = to_regclass($1)`, b.quoted()).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 2+7 { // -9, -7, then -3 to 3
		t.Errorf("%d partitions left, want 9", left)
	}
}

// TestPartitionedUpgrade: a table made partitioned at version 1, whose partitions hold
// rows, takes the later versions (ADD COLUMN, CREATE and DROP INDEX on the parent,
// which pass them on to the partitions); the partitions MaintainPartitions then
// creates get every index of the parent, named after the partition.
func TestPartitionedUpgrade(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := testdb.NewPostgresDB(t)
	table := testdb.IsolatedTable(t, db, outbox.Postgres.Name())
	q := quoteTable(outbox.Postgres, table)
	now := time.Now()
	v1, err := fs.ReadFile(outbox.Migrations(outbox.Postgres), "0001_create_outbox_event.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	for i, stmt := range strings.Split(strings.ReplaceAll(string(v1), `"outbox_event"`, q), ";") {
		stmt = strings.TrimSpace(stripComments(stmt))
		if stmt == "" {
			continue
		}
		if i == 0 {
			stmt = strings.Replace(stmt, "VARCHAR(64)  NOT NULL PRIMARY KEY", `VARCHAR(64)  COLLATE "C" NOT NULL PRIMARY KEY`, 1) + " PARTITION BY RANGE (event_id)"
		}
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("version 1, partitioned: %s: %v", stmt, err)
		}
	}
	for d := -1; d <= 1; d++ {
		part := quoteTable(outbox.Postgres, table+"_old"+strconv.Itoa(d+1))
		if _, err := db.ExecContext(ctx, `CREATE TABLE `+part+` PARTITION OF `+q+` FOR VALUES FROM ('`+ulidAt(day(now, d), 0)+`') TO ('`+ulidAt(day(now, d+1), 0)+`')`); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if _, err := db.ExecContext(ctx, `INSERT INTO `+q+` (event_id, event_type, aggregate_type, payload, available_at, created_at) VALUES ($1, 'T', 'A', '{}', $2, $2)`,
				ulidAt(day(now, d).Add(time.Hour), i), day(now, d).Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := outbox.MigrateTable(ctx, db, outbox.Postgres, table); err != nil {
		t.Fatalf("MigrateTable on a partitioned version 1 table with rows: %v", err)
	}
	if have, latest, err := outbox.SchemaVersion(ctx, db, outbox.Postgres, table); err != nil || have != latest {
		t.Fatalf("SchemaVersion = %d of %d, %v", have, latest, err)
	}
	rep, err := outboxpartition.Maintain(ctx, db, table, outboxpartition.Maintenance{
		Config: outboxpartition.Config{Period: testPeriod, Ahead: 3}, Now: now, Purge: storage.PurgeParams{Before: now.Add(-30 * testPeriod)}})
	if err != nil || len(rep.Created) != 2 {
		t.Fatalf("MaintainPartitions = %+v, %v; want the days 2 and 3 created", rep, err)
	}
	var parentIndexes int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_index WHERE indrelid = to_regclass($1)`, q).Scan(&parentIndexes); err != nil {
		t.Fatal(err)
	}
	rows, err := db.QueryContext(ctx, `SELECT c.relname, (SELECT COUNT(*) FROM pg_index x WHERE x.indrelid = c.oid),
		(SELECT string_agg(ic.relname, ' ' ORDER BY ic.relname) FROM pg_index x JOIN pg_class ic ON ic.oid = x.indexrelid WHERE x.indrelid = c.oid)
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = to_regclass($1) ORDER BY 1`, q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, names string
		var n int
		if err := rows.Scan(&name, &n, &names); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d indexes: %s", name, n, names)
		if n != parentIndexes {
			t.Errorf("partition %s has %d indexes, the table %d", name, n, parentIndexes)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	s, err := sqlStore(db, outbox.Postgres, outbox.SQLStoreConfig{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckConnection(ctx); err != nil {
		t.Fatalf("CheckConnection: %v", err)
	}
	id := ulidAt(day(now, 2).Add(time.Hour), 7)
	if _, err := s.Insert(ctx, db, storage.InsertParams{Events: []outbox.Event{testEvent(id, now.Add(-time.Minute))}}); err != nil {
		t.Fatalf("Insert into a partition MaintainPartitions created: %v", err)
	}
	due := 3 + 1 // yesterday's rows and the new one; today's when due, tomorrow's are not
	if day(now, 0).Add(time.Hour).Before(now) {
		due += 3
	}
	if b, err := s.Pending(ctx, storage.PendingParams{Now: now, Limit: 100}); err != nil || len(b.Events) != due {
		t.Fatalf("Pending = %d events, %v; want %d", len(b.Events), err, due)
	}
}
