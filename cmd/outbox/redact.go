package main

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// redacted is what a password is shown as.
const redacted = "xxxxx"

// redactDSN returns dsn with its passwords replaced by "xxxxx", for a message.
func redactDSN(dsn string) string {
	shown, _ := redactSecrets(dsn)
	return shown
}

// redactSecrets returns dsn with its passwords replaced by "xxxxx", and the passwords,
// as written and decoded, so that they can be removed from any other text. It knows
// the forms the command takes (docs/cli.md):
//
//   - a URL such as postgres://user:password@host/db?password=...: the password of the
//     user information (up to the last "@", as a password may hold "/" or "@") and of
//     the query's password parameters;
//   - libpq's key=value form (host=db user=app password='...'): the values of its
//     password keys, quoted or not;
//   - go-sql-driver/mysql's user:password@tcp(host)/db?params, parsed as that driver
//     does (the last "/", then the last "@" before it, then the first ":");
//   - an SQLite file path or file: URI, which holds no password: only the password
//     parameters of its query, if any.
//
// It errs on the side of hiding: text that merely looks like one of these forms loses
// what would be its password.
func redactSecrets(dsn string) (shown string, secrets []string) {
	switch {
	case urlScheme(dsn) > 0:
		return redactURL(dsn)
	case isKeyValue(dsn):
		return redactKeyValue(dsn)
	}
	// go-sql-driver/mysql's form, or a path.
	if slash := strings.LastIndexByte(dsn, '/'); slash > 0 {
		if at := strings.LastIndexByte(dsn[:slash], '@'); at >= 0 {
			if colon := strings.IndexByte(dsn[:at], ':'); colon >= 0 && colon+1 < at {
				secrets = addSecret(secrets, dsn[colon+1:at])
				dsn = dsn[:colon+1] + redacted + dsn[at:]
			}
		}
	}
	if q := strings.IndexByte(dsn, '?'); q >= 0 {
		var more []string
		dsn, more = redactQuery(dsn, q+1)
		secrets = append(secrets, more...)
	}
	return dsn, secrets
}

// urlScheme returns the length of s's "scheme://" prefix, or 0 when s has none.
func urlScheme(s string) int {
	i := strings.Index(s, "://")
	if i <= 0 {
		return 0
	}
	for j, r := range s[:i] {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !letter && (j == 0 || !(r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.')) {
			return 0
		}
	}
	return i + len("://")
}

// redactURL redacts a URL DSN: the password of its user information and its query's
// password parameters.
func redactURL(dsn string) (string, []string) {
	var secrets []string
	start := urlScheme(dsn)
	if at := strings.LastIndexByte(dsn[start:], '@'); at >= 0 {
		at += start
		if colon := strings.IndexByte(dsn[start:at], ':'); colon >= 0 && start+colon+1 < at {
			colon += start
			secrets = addSecret(secrets, dsn[colon+1:at])
			dsn = dsn[:colon+1] + redacted + dsn[at:]
		}
	}
	query := start
	if at := strings.LastIndexByte(dsn[start:], '@'); at >= 0 {
		query += at
	}
	if q := strings.IndexByte(dsn[query:], '?'); q >= 0 {
		var more []string
		dsn, more = redactQuery(dsn, query+q+1)
		secrets = append(secrets, more...)
	}
	return dsn, secrets
}

// redactQuery redacts the values of the password parameters of the query that starts
// at dsn[from:] (param=value&param=value), up to a "#".
func redactQuery(dsn string, from int) (string, []string) {
	var secrets []string
	var b strings.Builder
	b.WriteString(dsn[:from])
	query, rest := dsn[from:], ""
	if h := strings.IndexByte(query, '#'); h >= 0 {
		query, rest = query[:h], query[h:]
	}
	for i, param := range strings.Split(query, "&") {
		if i > 0 {
			b.WriteByte('&')
		}
		key, value, ok := strings.Cut(param, "=")
		if unescaped, err := url.QueryUnescape(key); err == nil {
			key = unescaped
		}
		if ok && value != "" && secretKey(key) {
			secrets = addSecret(secrets, value)
			param = param[:len(param)-len(value)] + redacted
		}
		b.WriteString(param)
	}
	b.WriteString(rest)
	return b.String(), secrets
}

// isKeyValue reports whether dsn is in libpq's key=value form: it starts with a
// keyword and "=".
func isKeyValue(dsn string) bool {
	s := strings.TrimLeft(dsn, " \t\n\r\v\f")
	eq := strings.IndexByte(s, '=')
	if eq <= 0 {
		return false
	}
	key := strings.TrimRight(s[:eq], " \t\n\r\v\f")
	for i, r := range key {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return key != ""
}

// redactKeyValue redacts the password values of a libpq key=value DSN, read as pgx
// reads it: key = value pairs separated by white space, a value either in single
// quotes or up to the next white space, with backslash escapes in both.
func redactKeyValue(dsn string) (string, []string) {
	var secrets []string
	var b strings.Builder
	s := dsn
	for {
		trimmed := strings.TrimLeft(s, " \t\n\r\v\f")
		b.WriteString(s[:len(s)-len(trimmed)])
		s = trimmed
		eq := strings.IndexByte(s, '=')
		if s == "" || eq < 0 {
			b.WriteString(s)
			return b.String(), secrets
		}
		key := strings.TrimSpace(s[:eq])
		valueStart := eq + 1 + len(s[eq+1:]) - len(strings.TrimLeft(s[eq+1:], " \t\n\r\v\f"))
		end, quoted := valueEnd(s, valueStart)
		b.WriteString(s[:valueStart])
		value := s[valueStart:end]
		if secretKey(key) && value != "" {
			inner := value
			if quoted {
				inner = strings.TrimSuffix(strings.TrimPrefix(value, "'"), "'")
			}
			secrets = addSecret(secrets, inner)
			secrets = addSecret(secrets, strings.NewReplacer(`\\`, `\`, `\'`, `'`, `\ `, ` `).Replace(inner))
			value = redacted
			if quoted {
				value = "'" + redacted + "'"
			}
		}
		b.WriteString(value)
		s = s[end:]
	}
}

// valueEnd returns where the value that starts at s[start:] ends, and whether it is
// quoted. An unterminated quote runs to the end.
func valueEnd(s string, start int) (end int, quoted bool) {
	if start < len(s) && s[start] == '\'' {
		for i := start + 1; i < len(s); i++ {
			switch s[i] {
			case '\\':
				i++
			case '\'':
				return i + 1, true
			}
		}
		return len(s), true
	}
	for i := start; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case ' ', '\t', '\n', '\r', '\v', '\f':
			return i, false
		}
	}
	return len(s), false
}

// secretKey reports whether a DSN's key or parameter holds a password: password,
// sslpassword, passwd, pwd, pass and the like, in any case. (MySQL's
// allowCleartextPasswords and allowNativePasswords are switches, not secrets.)
func secretKey(key string) bool {
	k := strings.ToLower(key)
	return strings.HasSuffix(k, "password") || k == "passwd" || k == "pwd" || k == "pass" || k == "passphrase" ||
		k == "secret" || k == "token"
}

// addSecret adds s, and its percent-decoded form when that differs, to secrets.
func addSecret(secrets []string, s string) []string {
	if s == "" || s == redacted {
		return secrets
	}
	if !slices.Contains(secrets, s) {
		secrets = append(secrets, s)
	}
	if d, err := url.PathUnescape(s); err == nil && d != s && d != "" && !slices.Contains(secrets, d) {
		secrets = append(secrets, d)
	}
	if d, err := url.QueryUnescape(s); err == nil && d != s && d != "" && !slices.Contains(secrets, d) {
		secrets = append(secrets, d)
	}
	for _, d := range secrets { // as a message quotes them (%q)
		if q := strconv.Quote(d); q[1:len(q)-1] != d && !slices.Contains(secrets, q[1:len(q)-1]) {
			secrets = append(secrets, q[1:len(q)-1])
		}
	}
	return secrets
}

// minScrubbed is the length from which scrub removes a known secret wherever it
// appears in a message. A shorter one would turn every occurrence of its letters in
// the message into "xxxxx"; the DSN's own redaction still hides it.
const minScrubbed = 3

// scrub returns msg without secrets (each replaced by "xxxxx", longest first, from
// minScrubbed bytes) and with every word that reads as a DSN redacted: a driver's
// error may quote the DSN, and a message may quote a DSN that was given where
// something else was expected (a flag's value, a command).
func scrub(msg string, secrets []string) string {
	secrets = slices.Clone(secrets)
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, s := range secrets {
		if len(s) >= minScrubbed {
			msg = strings.ReplaceAll(msg, s, redacted)
		}
	}
	// A Go-quoted string (a value the flag package quotes) is redacted as a whole, as
	// a key=value DSN holds spaces.
	var b strings.Builder
	for rest := msg; rest != ""; {
		i := strings.IndexByte(rest, '"')
		if i < 0 {
			b.WriteString(rest)
			break
		}
		b.WriteString(rest[:i])
		rest = rest[i:]
		quoted, err := strconv.QuotedPrefix(rest)
		if err != nil {
			b.WriteByte('"')
			rest = rest[1:]
			continue
		}
		rest = rest[len(quoted):]
		if s, err := strconv.Unquote(quoted); err == nil && redactDSN(s) != s {
			quoted = strconv.Quote(redactDSN(s))
		}
		b.WriteString(quoted)
	}
	msg = b.String()
	words := strings.Split(msg, " ")
	for i, w := range words {
		core := strings.Trim(w, "\"'`,;:()[]<>")
		if core == "" {
			continue
		}
		if shown := redactDSN(core); shown != core {
			words[i] = strings.Replace(w, core, shown, 1)
		}
	}
	return strings.Join(words, " ")
}
