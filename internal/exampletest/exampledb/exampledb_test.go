package exampledb

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outbox/internal/testdb"
)

func TestMain(m *testing.M) { testdb.VerifyTestMain(m) }

func TestPostgresDSNFor(t *testing.T) {
	t.Parallel()
	for server, want := range map[string]string{
		"postgres://postgres@127.0.0.1:5432/outbox_test?sslmode=disable": "postgres://postgres@127.0.0.1:5432/outbox_example_x?sslmode=disable",
		"postgresql://u:p@h/db":                            "postgresql://u:p@h/outbox_example_x",
		"host=h user=u dbname=outbox_test sslmode=disable": "host=h user=u sslmode=disable dbname=outbox_example_x",
		"host=h user=u":                                    "host=h user=u dbname=outbox_example_x",
	} {
		got, err := postgresDSNFor(server, "outbox_example_x")
		if err != nil || got != want {
			t.Errorf("postgresDSNFor(%q) = %q, %v; want %q", server, got, err, want)
		}
	}
}

// TestDatabases checks that each helper's database exists and is the one its DSN
// names during the test, and is gone after it.
func TestDatabases(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		driver  string
		create  func(testing.TB) string
		server  func(testing.TB) string
		current string
		exists  string
	}{
		{"PostgreSQL", "pgx", PostgresDatabase, testdb.PostgresDSN,
			"SELECT current_database()", "SELECT COUNT(*) FROM pg_database WHERE datname = $1"},
		{"MySQL", "mysql", MySQLDatabase, testdb.MySQLDSN,
			"SELECT DATABASE()", "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var name string
			t.Run("create", func(t *testing.T) {
				db := openDB(t, tt.driver, tt.create(t))
				if err := db.QueryRow(tt.current).Scan(&name); err != nil {
					t.Fatal(err)
				}
				if !strings.HasPrefix(name, "outbox_example_") || len(name) != len("outbox_example_")+16 {
					t.Errorf("database %q, want outbox_example_<16 hex>", name)
				}
				if _, err := db.Exec("CREATE TABLE t (id INT)"); err != nil {
					t.Errorf("create a table in %s: %v", name, err)
				}
				db.Close() // before the helper drops the database
			})
			var n int
			if err := openDB(t, tt.driver, tt.server(t)).QueryRow(tt.exists, name).Scan(&n); err != nil || n != 0 {
				t.Errorf("database %s: %d left (%v), want it dropped", name, n, err)
			}
		})
	}
}

func openDB(t *testing.T, driver, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("ping %s: %v", driver, err)
	}
	return db
}
