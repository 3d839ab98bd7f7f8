package outbox_test

import (
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
	outboxpartition "github.com/outboxkit/outbox/core/partition"
	"github.com/outboxkit/outbox/core/storage"
	"github.com/outboxkit/outbox/core/storetest"
	"github.com/outboxkit/outbox/internal/testdb"
)

// A PostgreSQL outbox table partitioned by event ID (package outboxpartition): the
// conformance suite on it, its maintenance, the purger's, and the conversion of a
// table with rows.

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
	return name + "_p" + start.Format("200601021504")
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
	cfg := outboxpartition.Config{Period: testPeriod, Ahead: last - first, From: day(now, first)}
	if err := outboxpartition.Migrate(ctx, db, table, cfg); err != nil {
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
// freeze that waits for a writer's lock gives up and leaves the partition; a detached
// partition left behind is dropped.
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
		"raced":          {day: -12, status: outbox.StatusDead, finished: -12 * testPeriod},
		"today-done":     {day: 0, status: outbox.StatusDone, finished: -5 * testPeriod},
		"done-in-period": {day: -6, status: outbox.StatusDone, finished: -5 * testPeriod},
	}
	id := writePartitionRows(t, b, now, rows)
	name := func(d int) string { return partitionName(b.table, day(now, d)) }
	purge := storage.PurgeParams{Before: now.Add(-3 * testPeriod), DeadBefore: day(now, -9)}

	// A transaction that holds the table (ONLY: not its partitions) SHARE UPDATE
	// EXCLUSIVE, as another DETACH … CONCURRENTLY or a VACUUM would: the first
	// partition's detach (-12's, the first one dropped) waits for it, frozen and still
	// attached. A replay of its DEAD row
	// then fails: the row stays DEAD and goes with the partition. (Once a detach has
	// started, the partition is no longer read, and a replay finds no row.)
	blocker, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Rollback()
	if _, err := blocker.ExecContext(ctx, `LOCK TABLE ONLY `+b.quoted()+` IN SHARE UPDATE EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	type result struct {
		rep outboxpartition.Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		// Ahead 2: the partitions exist, so that no ATTACH waits for the blocker.
		rep, err := outboxpartition.Maintain(ctx, b.db, b.table, outboxpartition.Maintenance{
			Config: outboxpartition.Config{Period: testPeriod, Ahead: 2}, Now: now, Purge: purge})
		done <- result{rep, err}
	}()
	waitForDetach(t, b, name(-12))
	_, raced := b.store.Replay(ctx, storage.ReplayParams{IDs: []string{id["raced"]}, Now: now})
	if raced == nil || !strings.Contains(raced.Error(), "23514") {
		t.Errorf("a replay in a frozen partition = %v, want a check violation (SQLSTATE 23514)", raced)
	}
	if err := blocker.Rollback(); err != nil {
		t.Fatal(err)
	}
	res := <-done
	rep, err := res.rep, res.err
	if err != nil {
		t.Fatalf("MaintainPartitions: %v", err)
	}
	t.Logf("report: %+v", rep)
	want := outboxpartition.Report{
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
	// A partition detached and not dropped (a DROP that failed) goes at the next run.
	left := name(-20)
	q := quoteTable(outbox.Postgres, strings.SplitN(b.table, ".", 2)[0]+"."+left)
	for _, stmt := range []string{`CREATE TABLE ` + q + ` (LIKE ` + b.quoted() + `)`,
		`ALTER TABLE ` + q + ` ADD CONSTRAINT "` + left + `_frozen" CHECK (status = 1) NOT VALID`,
		`CREATE TABLE ` + quoteTable(outbox.Postgres, b.table+"_p_not_ours") + ` (LIKE ` + b.quoted() + `)`} {
		if _, err := b.db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	rep, err = outboxpartition.Maintain(ctx, b.db, b.table, outboxpartition.Maintenance{
		Config: outboxpartition.Config{Period: testPeriod, Ahead: 3}, Now: now, Purge: purge})
	if err != nil {
		t.Fatalf("MaintainPartitions again: %v", err)
	}
	if !slices.Equal(rep.Dropped, []string{left, name(-8)}) || !slices.Equal(rep.Kept, []string{name(-9), name(-7)}) {
		t.Errorf("third run: %+v, want the detached table and -8 dropped, -9 and -7 kept", rep)
	}
	var parts int
	if err := b.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_inherits WHERE inhparent = to_regclass($1)`, b.quoted()).Scan(&parts); err != nil {
		t.Fatal(err)
	}
	if parts != 2+7 { // -9, -7, then -3 to 3
		t.Errorf("%d partitions left, want 9", parts)
	}
	if err := b.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_class WHERE oid = to_regclass($1)`, quoteTable(outbox.Postgres, b.table+"_p_not_ours")).Scan(&parts); err != nil || parts != 1 {
		t.Errorf("a table of the schema that no maintenance detached: %d, %v; want it left alone", parts, err)
	}
}

// writePartitionRows writes rows, each with an ID of its day, and makes them DONE or
// DEAD as they say; it returns their IDs by name.
func writePartitionRows(t *testing.T, b sqlBundle, now time.Time, rows map[string]partitionRow) map[string]string {
	t.Helper()
	ctx := t.Context()
	id := map[string]string{}
	names := slices.Sorted(maps.Keys(rows))
	for _, name := range names {
		r := rows[name]
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
	return id
}

// waitForDetach waits until a DETACH PARTITION of partition waits for a lock (for 2
// minutes at most: a guard against a hang, not a bound on the database).
func waitForDetach(t *testing.T, b sqlBundle, partition string) {
	t.Helper()
	guard := time.After(2 * time.Minute)
	for {
		var n int
		if err := b.db.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'
			AND query LIKE '%DETACH PARTITION%' AND query LIKE '%' || $1 || '%'`, partition).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		select {
		case <-guard:
			t.Fatalf("no DETACH PARTITION of %s waits", partition)
		case <-time.After(10 * time.Millisecond):
		}
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

// TestPartitionedPurge: the outbox's purger maintains a partitioned table at each run:
// it creates the partitions that cover two purge intervals ahead, drops the old
// partitions whose rows are all purgeable, deletes row by row only in the old
// partitions it keeps, and leaves the purgeable rows of recent partitions to the drop
// of their partition.
func TestPartitionedPurge(t *testing.T) {
	t.Parallel()
	b := setupPartitioned(t, -6, 1, false)
	ctx := t.Context()
	now := time.Now()
	id := writePartitionRows(t, b, now, map[string]partitionRow{
		"pending":   {day: -5, status: outbox.StatusNew},
		"kept-done": {day: -5, status: outbox.StatusDone, finished: -5 * testPeriod},
		"drop-done": {day: -4, status: outbox.StatusDone, finished: -4 * testPeriod},
		// Purgeable by its age, in a partition whose period ends after the cutoff.
		"young-partition": {day: -1, status: outbox.StatusDone, finished: -2 * testPeriod},
	})
	ob, err := outbox.New(b.db, outbox.Config{Dialect: outbox.Postgres, Table: b.table, PurgeRetention: testPeriod, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	n, err := outboxtest.Purge(ctx, ob)
	if err != nil || n != 1 {
		t.Fatalf("Purge = %d, %v; want 1 row deleted (kept-done)", n, err)
	}
	for name, gone := range map[string]bool{"pending": false, "kept-done": true, "drop-done": true, "young-partition": false} {
		_, err := b.store.Get(ctx, id[name])
		if gone != errors.Is(err, outbox.ErrNotFound) || !gone && err != nil {
			t.Errorf("%s: Get = %v, want gone %v", name, err, gone)
		}
	}
	parts := queryStrings(t, b.db, `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = to_regclass($1) ORDER BY 1`, b.quoted())
	// Dropped: -6, -4, -3, -2 (ended by the cutoff, nothing kept); kept: -5 (pending);
	// created: 2 and 3 (three periods ahead cover two hourly purges).
	var want []string
	for _, d := range []int{-5, -1, 0, 1, 2, 3} {
		want = append(want, partitionName(b.table, day(now, d)))
	}
	if !slices.Equal(parts, want) {
		t.Errorf("partitions %v, want %v", parts, want)
	}
	// A second run has nothing to do.
	if n, err := outboxtest.Purge(ctx, ob); err != nil || n != 0 {
		t.Errorf("second Purge = %d, %v", n, err)
	}
}

// TestConvertToPartitioned: an existing table with rows (ordered ones, a fan-out
// delivery's ID, a finished one, the opt-in aggregate index) becomes partitioned under
// its own name, rows, indexes and version kept; writes go on into the converted
// partition and the new ones; the converted partition is dropped like the others once
// all its rows are purgeable. A table with an ID after the bound is refused and left as
// it was.
func TestConvertToPartitioned(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := testdb.NewPostgresDB(t)
	table := testdb.IsolatedTable(t, db, outbox.Postgres.Name())
	if err := outbox.MigrateTable(ctx, db, outbox.Postgres, table); err != nil {
		t.Fatal(err)
	}
	if err := outbox.MigrateAggregateIndex(ctx, db, outbox.Postgres, table); err != nil {
		t.Fatal(err)
	}
	s, err := sqlStore(db, outbox.Postgres, outbox.SQLStoreConfig{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	var ids []string
	for i, at := range []time.Time{day(now, -3), day(now, -1), now.Add(-time.Minute)} {
		e := testEvent(ulidAt(at, i), at)
		e.AggregateID = "agg"
		e2 := testEvent(e.ID+".fanout", at)
		e3 := testEvent(ulidAt(at, 10+i), at)
		e3.OrderKey = "k"
		if _, err := s.Insert(ctx, db, storage.InsertParams{Events: []outbox.Event{e, e2, e3}}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID, e2.ID, e3.ID)
	}
	if _, err := s.MarkDone(ctx, storage.MarkDoneParams{IDs: ids[:1], DoneAt: day(now, -3)}); err != nil {
		t.Fatal(err)
	}
	q := quoteTable(outbox.Postgres, table)
	indexNames := func() []string {
		return queryStrings(t, db, `SELECT c.relname FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid WHERE x.indrelid = to_regclass($1) ORDER BY 1`, q)
	}
	before := indexNames()

	var cerr *outbox.ConfigError
	if err := outboxpartition.Migrate(ctx, nil, table, outboxpartition.Config{}); !errors.As(err, &cerr) || cerr.Field != "DB" {
		t.Errorf("Migrate with a nil db = %v, want a *ConfigError", err)
	}
	if err := outboxpartition.Convert(ctx, nil, table, outboxpartition.Config{}); !errors.As(err, &cerr) || cerr.Field != "DB" {
		t.Errorf("Convert with a nil db = %v, want a *ConfigError", err)
	}
	if _, err := outboxpartition.Maintain(ctx, nil, table, outboxpartition.Maintenance{}); !errors.As(err, &cerr) || cerr.Field != "DB" {
		t.Errorf("Maintain with a nil db = %v, want a *ConfigError", err)
	}
	if err := outboxpartition.Migrate(ctx, db, table, outboxpartition.Config{}); !errors.As(err, &cerr) {
		t.Errorf("Migrate of a table that is not partitioned = %v, want a *ConfigError", err)
	}
	if err := outboxpartition.Convert(ctx, db, table, outboxpartition.Config{Period: testPeriod}); err != nil {
		t.Fatalf("Convert: %v", err)
	}
	if err := outboxpartition.Convert(ctx, db, table, outboxpartition.Config{}); !errors.As(err, &cerr) {
		t.Errorf("Convert of a partitioned table = %v, want a *ConfigError", err)
	}
	if after := indexNames(); !slices.Equal(after, before) {
		t.Errorf("the table's indexes after Convert %v, before %v", after, before)
	}
	if have, latest, err := outbox.SchemaVersion(ctx, db, outbox.Postgres, table); err != nil || have != latest {
		t.Errorf("SchemaVersion = %d of %d, %v", have, latest, err)
	}
	bounds := queryStrings(t, db, `SELECT c.relname || ' ' || pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = to_regclass($1) ORDER BY 1`, q)
	_, bare, _ := strings.Cut(table, ".")
	wantBounds := []string{
		fmt.Sprintf("%s FOR VALUES FROM ('%s') TO ('%s')", partitionName(table, day(now, 1)), ulidAt(day(now, 1), 0), ulidAt(day(now, 2), 0)),
		fmt.Sprintf("%s FOR VALUES FROM ('%s') TO ('%s')", partitionName(table, day(now, 2)), ulidAt(day(now, 2), 0), ulidAt(day(now, 3), 0)),
		fmt.Sprintf("%s FOR VALUES FROM ('%s') TO ('%s')", partitionName(table, day(now, 3)), ulidAt(day(now, 3), 0), ulidAt(day(now, 4), 0)),
		fmt.Sprintf("%s FOR VALUES FROM ('%s') TO ('%s')", partitionName(table, day(now, 4)), ulidAt(day(now, 4), 0), ulidAt(day(now, 5), 0)),
		fmt.Sprintf("%s_pconverted FOR VALUES FROM (MINVALUE) TO ('%s')", bare, ulidAt(day(now, 1), 0)),
	}
	if !slices.Equal(bounds, wantBounds) {
		t.Errorf("partitions:\n%s\nwant\n%s", strings.Join(bounds, "\n"), strings.Join(wantBounds, "\n"))
	}

	// A connection that prepared a statement returning event_id before the conversion
	// fails it once (SQLSTATE 0A000, "cached plan must not change result type":
	// event_id is COLLATE "C" now), and pgx prepares it again at the next call.
	// docs/partitioning.md says to restart the processes: this is a pool opened after
	// the conversion, as theirs would be.
	db, err = sql.Open("pgx", testdb.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, err = sqlStore(db, outbox.Postgres, outbox.SQLStoreConfig{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckConnection(ctx); err != nil {
		t.Fatalf("CheckConnection after Convert: %v", err)
	}
	for _, id := range ids {
		if _, err := s.Get(ctx, id); err != nil {
			t.Errorf("Get(%s) after Convert: %v", id, err)
		}
	}
	today, tomorrow := testEvent(ulidAt(now, 99), now.Add(-time.Minute)), testEvent(ulidAt(day(now, 1).Add(time.Hour), 99), now.Add(-time.Minute))
	today.OrderKey = "k"
	if _, err := s.Insert(ctx, db, storage.InsertParams{Events: []outbox.Event{today, tomorrow}}); err != nil {
		t.Fatalf("Insert into the converted partition and a new one: %v", err)
	}
	listed, _, err := s.(storage.EventStore).ListEvents(ctx, storage.ListEventsParams{Status: outbox.StatusNew, EventFilter: outbox.EventFilter{AggregateID: "agg"}, Limit: 10, ScanLimit: 100})
	if err != nil || len(listed) != 2 {
		t.Errorf("the aggregate's NEW events after Convert: %d, %v; want 2", len(listed), err)
	}

	// Everything finished: the converted partition is dropped like the others.
	pending := queryStrings(t, db, `SELECT event_id FROM `+q+` WHERE status <> 1`)
	if _, err := db.ExecContext(ctx, `UPDATE `+q+` SET status = 1, done_at = $1 WHERE event_id = ANY($2)`, now, pending); err != nil {
		t.Fatal(err)
	}
	later := day(now, 10)
	rep, err := outboxpartition.Maintain(ctx, db, table, outboxpartition.Maintenance{
		Config: outboxpartition.Config{Period: testPeriod}, Now: later, Purge: storage.PurgeParams{Before: later.Add(-time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rep.Dropped, bare+"_pconverted") {
		t.Errorf("Maintain after everything finished: %+v, want the converted partition dropped", rep)
	}

	// A table with an ID that sorts after the bound: refused, left as it was.
	other := testdb.IsolatedTable(t, db, outbox.Postgres.Name())
	if err := outbox.MigrateTable(ctx, db, outbox.Postgres, other); err != nil {
		t.Fatal(err)
	}
	so, err := sqlStore(db, outbox.Postgres, outbox.SQLStoreConfig{Table: other})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := so.Insert(ctx, db, storage.InsertParams{Events: []outbox.Event{testEvent(ulidAt(now, 1), now), testEvent("order-42", now)}}); err != nil {
		t.Fatal(err)
	}
	if err := outboxpartition.Convert(ctx, db, other, outboxpartition.Config{}); !errors.As(err, &cerr) || !strings.Contains(err.Error(), `"order-42"`) {
		t.Fatalf("Convert of a table with the ID order-42 = %v, want a *ConfigError naming it", err)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+quoteTable(outbox.Postgres, other)+` WHERE NOT EXISTS (SELECT 1 FROM pg_partitioned_table WHERE partrelid = to_regclass($1))`,
		quoteTable(outbox.Postgres, other)).Scan(&n); err != nil || n != 2 {
		t.Errorf("the refused table: %d rows as a plain table, %v; want 2", n, err)
	}
}

// TestMaintainPartitionsFinishesADetach: a detach that a transaction on the table holds
// up past the step's timeout is left pending (its partition no longer read); the next
// run finishes it (DETACH … FINALIZE) and drops the partition, after it made the
// partitions ahead.
func TestMaintainPartitionsFinishesADetach(t *testing.T) {
	t.Parallel()
	b := setupPartitioned(t, -3, 1, false)
	ctx := t.Context()
	now := time.Now()
	reader, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Rollback()
	var n int
	if err := reader.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+b.quoted()+` WHERE event_id = $1`, ulidAt(now, 1)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	m := outboxpartition.Maintenance{Config: outboxpartition.Config{Period: testPeriod, Ahead: 2}, Now: now,
		Purge: storage.PurgeParams{Before: now}, StepTimeout: 3 * time.Second}
	rep, err := outboxpartition.Maintain(ctx, b.db, b.table, m)
	if err == nil || len(rep.Dropped) != 0 {
		t.Fatalf("Maintain with a detach held up = %+v, %v; want an error, nothing dropped", rep, err)
	}
	t.Logf("held up: %v", err)
	pending := queryStrings(t, b.db, `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = to_regclass($1) AND i.inhdetachpending`, b.quoted())
	if !slices.Equal(pending, []string{partitionName(b.table, day(now, -3))}) {
		t.Fatalf("partitions pending detach %v, want the -3 one", pending)
	}
	if err := reader.Rollback(); err != nil {
		t.Fatal(err)
	}
	m.Config.Ahead = 3
	rep, err = outboxpartition.Maintain(ctx, b.db, b.table, m)
	if err != nil {
		t.Fatalf("Maintain after the transaction ended: %v", err)
	}
	want := []string{partitionName(b.table, day(now, -3)), partitionName(b.table, day(now, -2)), partitionName(b.table, day(now, -1))}
	if !slices.Equal(rep.Dropped, want) || !slices.Equal(rep.Created, []string{partitionName(b.table, day(now, 3))}) {
		t.Errorf("second run %+v; want %v dropped and day 3 created", rep, want)
	}
}

// queryStrings returns the first column of q's rows.
func queryStrings(t *testing.T, db *sql.DB, q string, args ...any) []string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
