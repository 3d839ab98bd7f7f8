package outbox

import (
	"fmt"
	"strconv"
	"strings"
)

// sqliteBusyTimeoutMillis is how long a connection opened with [SQLiteDSN] waits for
// another writer's lock before it reports "database is locked".
const sqliteBusyTimeoutMillis = 10000

// SQLiteDSN returns a modernc.org/sqlite DSN (driver "sqlite") that opens or creates the
// file at path with a 10 s busy timeout, WAL and _txlock=immediate (docs/databases.md).
// Append parameters as "&_pragma=…".
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
