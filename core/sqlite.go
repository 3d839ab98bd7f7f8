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
// "sqlite") that opens the database file at path, creating it when missing, ready for
// concurrent use through one *sql.DB:
//
//   - _pragma=busy_timeout(10000): a connection waits up to 10 s for a lock instead of
//     failing at once with "database is locked". The driver applies it before any other
//     pragma, so opening a connection cannot fail on a lock either.
//   - _pragma=journal_mode(WAL): readers never block the writer and the writer never
//     blocks readers.
//   - _pragma=synchronous(NORMAL): in WAL mode, commits stay durable against
//     application crashes (a power loss may drop the last commits) and are much faster.
//   - _txlock=immediate: every transaction takes the write lock at BEGIN, where
//     busy_timeout applies. A default (deferred) transaction that reads first and
//     writes later fails with SQLITE_BUSY when another writer got in between, and no
//     timeout helps it.
//
// Because every transaction is a write transaction, transactions are serialised; keep
// them short. Add driver parameters of your own after it, for example
// SQLiteDSN(path) + "&_pragma=foreign_keys(1)". The path is escaped, so it may contain
// '?', '#' or '%'. Use a file, not ":memory:": each pooled connection would see its
// own empty in-memory database.
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
