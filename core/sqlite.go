package outbox

import (
	"fmt"
	"strconv"
	"strings"
)

// sqliteBusyTimeoutMillis is how long a connection opened with [SQLiteDSN] waits for
// another writer's lock before it reports "database is locked".
const sqliteBusyTimeoutMillis = 10000

// SQLiteDSN returns a data source name for the modernc.org/sqlite driver (driver name
// "sqlite") that opens (or creates) the database file at path, ready for concurrent use
// through one *sql.DB: busy_timeout(10000) (wait up to 10 s for a lock), WAL journal,
// synchronous(NORMAL) (durable against application crashes), and _txlock=immediate
// (every transaction takes the write lock at BEGIN, where busy_timeout applies, so a
// read-then-write transaction never fails with SQLITE_BUSY). Transactions are therefore
// serialised; keep them short. Append driver parameters of your own ("&_pragma=…").
// The path is escaped. Use a file, not ":memory:" (each pooled connection would get its
// own empty database).
func SQLiteDSN(path string) string {
	prefix := "file:"
	if strings.HasPrefix(path, "/") {
		prefix = "file://" // empty authority, so that a path starting with "//" stays a path
	}
	return prefix + escapeSQLitePath(path) +
		"?_pragma=busy_timeout(" + strconv.Itoa(sqliteBusyTimeoutMillis) + ")" +
		"&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"
}

// escapeSQLitePath percent-encodes the characters that end or escape the path part of
// an SQLite URI filename.
func escapeSQLitePath(path string) string {
	var sb strings.Builder
	for i := 0; i < len(path); i++ {
		switch c := path[i]; c {
		case '%', '?', '#':
			fmt.Fprintf(&sb, "%%%02X", c)
		default:
			sb.WriteByte(c)
		}
	}
	return sb.String()
}
