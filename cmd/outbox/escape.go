package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// What the command prints of the database's text (event types, IDs, errors, actors,
// headers, payloads: anything a row may hold) reaches the operator's terminal, which
// acts on control characters. None of them is printed as it is: a control character
// (C0 such as ESC, BEL, CR, LF and TAB; DEL; C1, U+0080 to U+009F), a format character
// (the bidirectional overrides and isolates U+202A–U+202E and U+2066–U+2069, zero-width
// characters), a separator other than the space, and a byte that is not UTF-8 are
// shown escaped, as Go writes them (\x1b, \n, \u202e, \x9b).

// printable reports whether r may reach the terminal as it is: a letter, mark,
// number, punctuation, symbol or the ASCII space (strconv.IsPrint).
func printable(r rune) bool { return strconv.IsPrint(r) }

// safe reports whether s is UTF-8 and every rune of it printable.
func safe(s string) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || !printable(r) {
			return false
		}
		i += n
	}
	return true
}

// text returns s for a line or a table cell: as it is when it is safe, else
// Go-quoted ("a\nb\x1b[31m"). A value that starts with a double quote is quoted too,
// so that a quoted value always means an escaped one.
func text(s string) string {
	if safe(s) && !strings.HasPrefix(s, `"`) {
		return s
	}
	return strconv.Quote(s)
}

// cell returns s for a table cell as text does, cut to max runes when max > 0: a cut
// value ends with "…", after the quotes of a quoted one.
func cell(s string, max int) string {
	if max > 0 && utf8.RuneCountInString(s) > max {
		n := 0
		for i := range s { // each byte that is not UTF-8 counts as a rune
			if n == max-1 {
				return text(s[:i]) + "…"
			}
			n++
		}
	}
	return text(s)
}

// escapeControls returns message s with every rune that is not printable, and every
// byte that is not UTF-8, escaped in place (\x1b, \n, \u202e, \xff): for messages,
// whose quotes are part of the prose.
func escapeControls(s string) string {
	if safe(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case !printable(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// jsonText returns JSON document b (a payload, the headers) on one line: compacted,
// with every rune that is not printable written as a JSON escape (\u001b, \u202e), so
// that it is the same JSON value. A document that is not valid JSON or not UTF-8 is
// shown as text does, Go-quoted when it needs escaping.
func jsonText(b []byte) string {
	var buf bytes.Buffer
	if !utf8.Valid(b) || json.Compact(&buf, b) != nil {
		return text(string(b))
	}
	return escapeJSON(buf.String(), false)
}

// escapeJSON returns JSON text s with every rune that is not printable written as a
// JSON escape; keepNewlines keeps the line breaks of indented JSON, which are never
// inside a string (encoding/json escapes those). In valid JSON such runes can only be
// inside strings, where the escape stands for the same rune. A byte that is not UTF-8
// becomes U+FFFD, as encoding/json makes it in strings.
func escapeJSON(s string, keepNewlines bool) string {
	if safe(s) || keepNewlines && safe(strings.ReplaceAll(s, "\n", "")) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case printable(r) || keepNewlines && r == '\n':
			b.WriteRune(r)
		case r > 0xFFFF:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}
