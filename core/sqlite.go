package outbox

import (
	"fmt"
	"strconv"
	"strings"
)

// sqliteBusyTimeoutMillis is how long a connection opened with [SQLiteDSN] waits for
// another writer's lock before it reports "database is locked".
const sqliteBusyTimeoutMillis = 10000

// SQLiteDSN returns a data source name for modernc.org/sqlite (driver "sqlite") that
// opens or creates the file at path with busy_timeout(10000), WAL, synchronous(NORMAL)
// and _txlock=immediate (each transaction takes the write lock at BEGIN, so none fails
// with SQLITE_BUSY mid-way; keep them short). Append parameters as "&_pragma=…". Use a
// file, not ":memory:" (each connection would get its own database).
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
