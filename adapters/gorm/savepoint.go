package outboxgorm

import (
	"strings"
	"unicode"
)

// savepointKind is the kind of a savepoint statement.
type savepointKind int

const (
	opSavepoint  savepointKind = iota + 1 // SAVEPOINT name
	opRollbackTo                          // ROLLBACK [WORK | TRANSACTION] TO [SAVEPOINT] name
	opRelease                             // RELEASE [SAVEPOINT] name
)

// savepointOp is a parsed savepoint statement.
type savepointOp struct {
	kind savepointKind
	name string // normalised: see savepointName
}

// parseSavepoint recognises the savepoint statements of PostgreSQL, MySQL/MariaDB and
// SQLite: SAVEPOINT, ROLLBACK TO and RELEASE, in any case, with surrounding space and an
// optional trailing semicolon. Anything else (a plain ROLLBACK included) is not one.
func parseSavepoint(query string) (savepointOp, bool) {
	q := strings.TrimLeftFunc(query, unicode.IsSpace)
	if q == "" || !strings.ContainsRune("sSrR", rune(q[0])) {
		return savepointOp{}, false // the common case: no allocation, no further work
	}
	q = strings.TrimRightFunc(strings.TrimSuffix(strings.TrimRightFunc(q, unicode.IsSpace), ";"), unicode.IsSpace)
	word, rest := cutWord(q)
	var op savepointOp
	switch {
	case strings.EqualFold(word, "SAVEPOINT"):
		op.kind = opSavepoint
	case strings.EqualFold(word, "RELEASE"):
		op.kind = opRelease
		rest = skipWord(rest, "SAVEPOINT")
	case strings.EqualFold(word, "ROLLBACK"):
		op.kind = opRollbackTo
		rest = skipWord(skipWord(rest, "WORK"), "TRANSACTION")
		if word, rest = cutWord(rest); !strings.EqualFold(word, "TO") {
			return savepointOp{}, false
		}
		rest = skipWord(rest, "SAVEPOINT")
	default:
		return savepointOp{}, false
	}
	name, ok := savepointName(rest)
	if !ok {
		return savepointOp{}, false
	}
	op.name = name
	return op, true
}

// savepointName returns the key a savepoint name is tracked under: a quoted name ("sp",
// `sp`) without its quotes, an unquoted one in lower case (PostgreSQL folds it; MySQL and
// SQLite compare names without regard to case). Where a database matches names more
// loosely than these keys, a rollback finds an older savepoint here than in the database
// and forgets more callbacks than needed: those events go to the poller, none is
// delivered wrongly.
func savepointName(s string) (string, bool) {
	if s == "" {
		return "", false
	}
	if n := len(s); n >= 2 && (s[0] == '"' || s[0] == '`') && s[n-1] == s[0] {
		return s[1 : n-1], true
	}
	if strings.IndexFunc(s, unicode.IsSpace) >= 0 {
		return "", false
	}
	return strings.ToLower(s), true
}

// cutWord splits s after its first word and trims the space before the rest.
func cutWord(s string) (word, rest string) {
	i := strings.IndexFunc(s, unicode.IsSpace)
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimLeftFunc(s[i:], unicode.IsSpace)
}

// skipWord drops keyword from the start of s when more follows it (so that "RELEASE
// savepoint" still names a savepoint called savepoint).
func skipWord(s, keyword string) string {
	if word, rest := cutWord(s); strings.EqualFold(word, keyword) && rest != "" {
		return rest
	}
	return s
}
