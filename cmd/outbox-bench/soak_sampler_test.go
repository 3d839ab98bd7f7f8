package main

import (
	"database/sql"
	"fmt"
	"os"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
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
