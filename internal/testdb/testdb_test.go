package testdb

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	outbox "github.com/outboxkit/outbox/core"
)

func TestScriptPath(t *testing.T) {
	t.Parallel()
	p, err := scriptPath()
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(p) != "testdb.sh" {
		t.Fatalf("scriptPath = %s", p)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
}

func TestSQLite(t *testing.T) {
	t.Parallel()
	db := NewSQLiteDB(t)
	if table := IsolatedTable(t, db, outbox.SQLite.Name()); table != outbox.DefaultTable {
		t.Fatalf("IsolatedTable = %s", table)
	}
	if err := outbox.Migrate(t.Context(), db, outbox.SQLite); err != nil {
		t.Fatal(err)
	}
}

// TestPostgres starts (or reuses) the server and isolates two tables from each other.
// This package has no TestMain, so the test stops the server it started itself.
func TestPostgres(t *testing.T) {
	t.Cleanup(StopAll)
	db := NewPostgresDB(t)
	var tables []string
	for range 2 {
		table := IsolatedTable(t, db, outbox.Postgres.Name())
		if !strings.HasSuffix(table, "."+outbox.DefaultTable) {
			t.Fatalf("IsolatedTable = %s", table)
		}
		if err := outbox.MigrateTable(t.Context(), db, outbox.Postgres, table); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, table)
	}
	if tables[0] == tables[1] {
		t.Fatalf("two tests share %s", tables[0])
	}
	if dsn := PostgresDSN(t); !strings.Contains(dsn, "127.0.0.1") && os.Getenv(EnvPostgresDSN) == "" {
		t.Errorf("server not on loopback: %s", dsn)
	}
}

// TestMySQL starts (or reuses) the MariaDB server and isolates two tables from each
// other in databases of their own.
func TestMySQL(t *testing.T) {
	t.Cleanup(StopAll)
	db := NewMySQLDB(t)
	var tables []string
	for range 2 {
		table := IsolatedTable(t, db, outbox.MySQL.Name())
		if !strings.HasSuffix(table, "."+outbox.DefaultTable) {
			t.Fatalf("IsolatedTable = %s", table)
		}
		if err := outbox.MigrateTable(t.Context(), db, outbox.MySQL, table); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, table)
	}
	if tables[0] == tables[1] {
		t.Fatalf("two tests share %s", tables[0])
	}
	dsn := MySQLDSN(t)
	if !strings.Contains(dsn, "127.0.0.1") && os.Getenv(EnvMySQLDSN) == "" {
		t.Errorf("server not on loopback: %s", dsn)
	}
	if !strings.Contains(dsn, outbox.MySQLDSNParams) {
		t.Errorf("DSN lacks %s: %s", outbox.MySQLDSNParams, dsn)
	}
}

// TestSkipSummary: the line StopAll prints names each server whose tests were skipped,
// how many, and why; nothing when no test was skipped (summaryLine adds the package).
func TestSkipSummary(t *testing.T) {
	t.Parallel()
	pg := &server{what: "PostgreSQL", envDSN: EnvPostgresDSN, started: true, skipped: 12,
		err: fmt.Errorf("testdb.sh start postgres: %w (exit status 2)\ntestdb: PostgreSQL binaries not found", errNoBinaries)}
	my := &server{what: "MariaDB", envDSN: EnvMySQLDSN, started: true, skipped: 1,
		err: errors.New("testdb.sh start mysql: exit status 1\ntestdb: mariadbd did not start")}
	ok := &server{what: "MariaDB", envDSN: EnvMySQLDSN, started: true, dsn: "x"}
	want := "skipped PostgreSQL in 12 tests (no server binaries and OUTBOX_TEST_POSTGRES_DSN unset); " +
		"skipped MariaDB in 1 test (could not start: testdb.sh start mysql: exit status 1)"
	if got := skipSummary(pg, my); got != want {
		t.Errorf("skipSummary =\n%s\nwant\n%s", got, want)
	}
	if got := skipSummary(ok); got != "" {
		t.Errorf("skipSummary without skips = %q, want nothing", got)
	}
}
