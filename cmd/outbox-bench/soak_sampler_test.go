package main

import (
	"database/sql"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// TestSoakSamplerReadsPostgresSizes: the sampler reads the heap and every index of a
// plain outbox table, and of a partitioned one summed over its partitions. Summing
// over pg_partition_tree alone read 0 bytes for a plain table (it returns no row for a
// relation outside a partition tree), which a soak of the default layout reported as
// such.
func TestSoakSamplerReadsPostgresSizes(t *testing.T) {
	dsn := os.Getenv("OUTBOX_TEST_POSTGRES_DSN")
	if dsn == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set and OUTBOX_TEST_POSTGRES_DSN is not: PostgreSQL is required")
		}
		t.Skip("OUTBOX_TEST_POSTGRES_DSN is not set (scripts/testdb.sh start postgres)")
	}
	ctx := t.Context()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() }) // after the schema's drop below
	schema := fmt.Sprintf("soak_sampler_%d", time.Now().UnixNano())
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := db.Exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			t.Error(err)
		}
	})
	tg := &target{kind: "postgres", driver: "pgx", dsn: dsn, dialect: outbox.Postgres, db: db, schema: schema}
	if err := tg.reset(ctx); err != nil { // the table with historyRows delivered rows
		t.Fatal(err)
	}
	check := func(layout string) {
		t.Helper()
		s, err := newSoakSampler(ctx, tg)
		if err != nil {
			t.Fatal(err)
		}
		defer s.close()
		sizes, err := s.readSizes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		indexes := 0
		for _, r := range sizes {
			if r.Kind == "index" {
				indexes++
			}
			if r.Kind != "toast" && r.Bytes <= 0 {
				t.Errorf("%s table: %s %s has %d bytes", layout, r.Kind, r.Name, r.Bytes)
			}
		}
		if indexes < 4 {
			t.Errorf("%s table: %d indexes read, want the primary key, pending, claim, dead and finished indexes at least: %+v", layout, indexes, sizes)
		}
	}
	check("plain")
	if err := tg.partitionForSoak(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	check("partitioned")
}

// TestSoakSamplerReadsPollServerTimes: on a server that preloads pg_stat_statements, as
// the servers outbox-bench starts for a soak do, the sampler finds every kind of poll
// statement the library runs (its statements' text is the library's, which pollKind
// must still recognise), counts only what ran since its last read, and drops the
// extension it created.
func TestSoakSamplerReadsPollServerTimes(t *testing.T) {
	if os.Getenv("OUTBOX_TEST_POSTGRES_DSN") == "" && os.Getenv("CI") == "" {
		t.Skip("OUTBOX_TEST_POSTGRES_DSN is not set: this machine may have no PostgreSQL for scripts/testdb.sh")
	}
	ctx := t.Context()
	servers := &serverSet{postgresArgs: "-c shared_preload_libraries=pg_stat_statements"}
	t.Cleanup(servers.stopAll)
	dsn, _, err := servers.start(ctx, "postgres", false)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tg := &target{kind: "postgres", driver: "pgx", dsn: dsn, dialect: outbox.Postgres, db: db, schema: "soak_statements"}
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+tg.schema); err != nil {
		t.Fatal(err)
	}
	if err := tg.reset(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := newSoakSampler(ctx, tg)
	if err != nil {
		t.Fatal(err)
	}
	if !s.statements || !s.dropStatements {
		t.Fatalf("pg_stat_statements not started (%v) or not created by the sampler (%v)", s.statements, s.dropStatements)
	}
	var smp soakSample
	s.poll(ctx, &smp, outbox.DefaultPollBatchSize, 10*time.Second) // from the head, from the mark
	claims, ok := s.store.(storage.ClaimStore)
	if !ok {
		t.Fatal("the SQL store does not claim")
	}
	for _, from := range []time.Time{{}, time.Now().Add(-time.Minute)} {
		if _, err := claims.Claim(ctx, storage.ClaimParams{Token: "n/1", TTL: time.Minute, Limit: 10, DueFrom: from}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.countByStatus(ctx); err != nil { // not a poll statement
		t.Fatal(err)
	}
	stats, err := s.pollServer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, st := range stats {
		kinds = append(kinds, st.Kind)
		if st.Calls != 1 || st.MaxMS <= 0 || st.MeanMS > st.MaxMS {
			t.Errorf("%s: %+v, want one call of a positive time", st.Kind, st)
		}
	}
	if want := []string{"mark", "head", "claim mark", "claim head"}; !slices.Equal(kinds, want) {
		t.Errorf("kinds %q, want %q", kinds, want)
	}
	if stats, err := s.pollServer(ctx); err == nil {
		t.Errorf("second read: %+v, want an error: nothing ran since the first", stats)
	}
	s.close()
	var exists bool
	if err := db.QueryRowContext(ctx, "SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'pg_stat_statements')").Scan(&exists); err != nil || exists {
		t.Errorf("the extension is still there after close (%v, %v)", exists, err)
	}
}
