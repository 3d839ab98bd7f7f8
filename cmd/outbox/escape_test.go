package main

import (
	"encoding/json"
	"fmt"
	"testing"
	"unicode/utf8"
)

func TestText(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, text, message string }{
		{"OrderPlaced", "OrderPlaced", "OrderPlaced"},
		{"Bestellung für Zürich ✓", "Bestellung für Zürich ✓", "Bestellung für Zürich ✓"},
		{"", "", ""},
		{"a\x1b[2Jb", `"a\x1b[2Jb"`, `a\x1b[2Jb`},
		{"bell\a cr\r lf\n tab\t del\x7f", `"bell\a cr\r lf\n tab\t del\x7f"`, `bell\a cr\r lf\n tab\t del\x7f`},
		{"c1 \u0085\u009b", `"c1 \u0085\u009b"`, `c1 \u0085\u009b`},
		{"bidi \u202atxt\u202e\u2066\u2069", `"bidi \u202atxt\u202e\u2066\u2069"`, `bidi \u202atxt\u202e\u2066\u2069`},
		{"not UTF-8 \x9b\xff", `"not UTF-8 \x9b\xff"`, `not UTF-8 \x9b\xff`},
		{`"quoted" value`, `"\"quoted\" value"`, `"quoted" value`},
		{`a "b" \x1b`, `a "b" \x1b`, `a "b" \x1b`},
	} {
		if got := text(c.in); got != c.text {
			t.Errorf("text(%q) = %s, want %s", c.in, got, c.text)
		}
		if got := escapeControls(c.in); got != c.message {
			t.Errorf("escapeControls(%q) = %s, want %s", c.in, got, c.message)
		}
	}
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"eleven runes", 10, "eleven ru…"},
		{"a\nb\nc\nd\ne\nf", 4, `"a\nb"…`},
		{"äöü\xffxyz", 5, `"äöü\xff"…`},
	} {
		if got := cell(c.in, c.max); got != c.want {
			t.Errorf("cell(%q, %d) = %s, want %s", c.in, c.max, got, c.want)
		}
	}
	for _, c := range []struct{ in, want string }{
		{`{"n": 2}`, `{"n":2}`},
		{"{\n\t\"a\": \"x\u202e\u0085\x7f\",\r\n \"b\": \"\\u001b\"}", `{"a":"x\u202e\u0085\u007f","b":"\u001b"}`},
		{"\"emoji \U0001F600 tag \U000E0041\"", `"emoji ` + "\U0001F600" + ` tag \udb40\udc41"`},
		{"{\"a\": \"\xff\"}", `"{\"a\": \"\xff\"}"`},
		{"not json \x1b", `"not json \x1b"`},
	} {
		got := jsonText([]byte(c.in))
		if got != c.want {
			t.Errorf("jsonText(%q) = %s, want %s", c.in, got, c.want)
		}
		if want := json.Valid([]byte(c.in)) && utf8.ValidString(c.in); want {
			var a, b any
			if json.Unmarshal([]byte(c.in), &a) != nil || json.Unmarshal([]byte(got), &b) != nil || fmt.Sprint(a) != fmt.Sprint(b) {
				t.Errorf("jsonText(%q) = %s: another JSON value", c.in, got)
			}
		}
	}
}
