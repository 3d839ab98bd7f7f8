// Package exampledb gives an example's test a database of its own on the test servers.
// It is apart from package exampletest so that an example whose tests need no server
// (the quickstart) links no database driver but its own.
package exampledb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"   // also registers the "mysql" driver
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver

	"github.com/outboxkit/outbox/internal/testdb"
)

// PostgresDatabase creates a database of its own for the test, named
// outbox_example_<random>, on the PostgreSQL server of [testdb.PostgresDSN], and returns
// a DSN for it: the server's DSN with the database name replaced. The database is
// dropped when the test ends (after the example's process, when PostgresDatabase is
// called before [Run]). It skips or fails the test as testdb.PostgresDSN does when no
// server can be had.
func PostgresDatabase(tb testing.TB) string {
	tb.Helper()
	server := testdb.PostgresDSN(tb)
	name := databaseName()
	dsn, err := postgresDSNFor(server, name)
	if err != nil {
		tb.Fatalf("PostgreSQL DSN: %v", err)
	}
	createDatabase(tb, "pgx", server, name,
		`CREATE DATABASE "`+name+`"`,
		`DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE)`)
	return dsn
}

// MySQLDatabase creates a database of its own for the test, named
// outbox_example_<random>, on the MySQL/MariaDB server of [testdb.MySQLDSN], and returns
// a DSN for it: the server's DSN (with its parameters, such as parseTime=true) with the
// database name replaced. The database is dropped when the test ends (after the
// example's process, when MySQLDatabase is called before [Run]). It skips or fails the
// test as testdb.MySQLDSN does when no server can be had.
func MySQLDatabase(tb testing.TB) string {
	tb.Helper()
	server := testdb.MySQLDSN(tb)
	cfg, err := mysql.ParseDSN(server)
	if err != nil {
		tb.Fatalf("MySQL DSN: %v", err)
	}
	name := databaseName()
	createDatabase(tb, "mysql", server, name,
		"CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4",
		"DROP DATABASE IF EXISTS `"+name+"`")
	cfg.DBName = name
	return cfg.FormatDSN()
}

// databaseName returns outbox_example_ and 16 random hex characters.
func databaseName() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return "outbox_example_" + hex.EncodeToString(b[:])
}

// createDatabase runs create on the server and drop when the test ends.
func createDatabase(tb testing.TB, driver, server, name, create, drop string) {
	tb.Helper()
	db, err := sql.Open(driver, server)
	if err != nil {
		tb.Fatalf("open %s: %v", driver, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, create); err != nil {
		db.Close()
		tb.Fatalf("create database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, drop); err != nil {
			tb.Errorf("drop database %s: %v", name, err)
		}
	})
}

// postgresDSNFor returns server with its database replaced by name. server is a URL
// (postgres://…/db?…) or a key/value string (host=… dbname=…).
func postgresDSNFor(server, name string) (string, error) {
	if strings.HasPrefix(server, "postgres://") || strings.HasPrefix(server, "postgresql://") {
		u, err := url.Parse(server)
		if err != nil {
			return "", err
		}
		u.Path, u.RawPath = "/"+name, ""
		return u.String(), nil
	}
	var fields []string
	for _, f := range strings.Fields(server) {
		if !strings.HasPrefix(f, "dbname=") {
			fields = append(fields, f)
		}
	}
	if len(fields) == 0 {
		return "", fmt.Errorf("cannot read DSN %q", server)
	}
	return strings.Join(append(fields, "dbname="+name), " "), nil
}
