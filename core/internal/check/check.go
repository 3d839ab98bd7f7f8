// Package check holds the checks and error texts shared by the outbox package, its
// storage layer and the SQL store: text that every database stores, IDs that can name
// an event, the errors of bad arguments and of a failed audit entry.
package check

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// IDLen is the longest event ID, in bytes (outboxtype.MaxIDLen).
const IDLen = 64

// Bounds of an audit entry's text, in bytes: longer values are cut, ending with "…".
const (
	ActorLen       = 255
	AuditTargetLen = 4000
)

// ErrInvalidArgument is outboxtype.ErrInvalidArgument: see there.
var ErrInvalidArgument = errors.New("outbox: invalid argument")

// AuditReason describes err, the failure to write an audit entry, for [AuditError.Reason]:
// the drivers' messages are matched, as isLockConflict does.
func AuditReason(err error) string {
	if errors.Is(err, ErrAuditEntryGone) {
		return "the entry of the earlier batches is gone"
	}
	msg := err.Error()
	for _, r := range [...]struct{ reason, marks string }{
		{"the audit table does not exist", "SQLSTATE 42P01|Error 1146 |no such table"},
		{"no permission to write the audit table", "SQLSTATE 42501|Error 1142 |Error 1044 |permission denied|readonly database|not authorized"},
	} {
		for m := range strings.SplitSeq(r.marks, "|") {
			if strings.Contains(msg, m) {
				return r.reason
			}
		}
	}
	return "a database error"
}

// ErrorPrefilter is the LIKE pattern (escaped with '!') that the SQL store matches
// against LOWER(last_error) to narrow a list by ErrorContains before MatchesError
// decides: every row that matches is among those it selects, whatever the database's
// LOWER does beyond ASCII (PostgreSQL's follows the database's ctype, MySQL's the
// charset, SQLite's is ASCII only). ASCII letters are lowered, other ASCII characters
// kept, and any other character, as well as k and s (whose fold orbits hold the Kelvin
// sign and the long s), becomes %.
func ErrorPrefilter(sub string) string {
	var b strings.Builder
	b.WriteByte('%')
	wild := true // b ends with the wildcard %
	for _, r := range sub {
		if r >= utf8.RuneSelf || r == 'k' || r == 'K' || r == 's' || r == 'S' {
			if !wild {
				b.WriteByte('%')
				wild = true
			}
			continue
		}
		b.WriteString(LikeEscape(strings.ToLower(string(r))))
		wild = false
	}
	if !wild {
		b.WriteByte('%')
	}
	return b.String()
}

// ValidText reports whether s can be stored in a text column of every supported
// database: valid UTF-8 (JSON encoding would silently replace invalid bytes) and no NUL
// (PostgreSQL rejects it).
func ValidText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// Invalid reports bad input to a [Store] method; nothing runs in that case.
func Invalid(method, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidArgument, method, fmt.Sprintf(format, args...))
}

// PossibleID reports whether id could be the ID of a stored event. A lookup of any other
// ID is a miss, answered without a query.
func PossibleID(id string) bool { return id != "" && len(id) <= IDLen && ValidText(id) }

// ErrAuditEntryGone is the error of a replay-all's later batch whose entry is not in
// the audit table any more.
var ErrAuditEntryGone = errors.New("audit entry not found")

// LikeEscape escapes the LIKE wildcards of s with '!'.
func LikeEscape(s string) string {
	return strings.NewReplacer("!", "!!", "%", "!%", "_", "!_").Replace(s)
}

// CutText returns s cut to at most n bytes on a character boundary.
func CutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
