package sqlstore

import (
	"errors"
	"strings"
	"testing"

	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/internal/fuzztally"
)

func TestValidateTableName(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 63)
	cases := []struct {
		name string
		ok   bool
	}{
		{"outbox_event", true},
		{"_x", true},
		{"Outbox2", true},
		{"select", true}, // quoted, so reserved words are fine
		{long, true},
		{"app.outbox_event", true},
		{long + "." + long, true},
		{"", false},
		{"1abc", false},
		{long + "a", false},
		{"app." + long + "a", false},
		{"a.b.c", false},
		{".a", false},
		{"a.", false},
		{"a-b", false},
		{"a b", false},
		{`a"b`, false},
		{"a`b", false},
		{"a;drop table x", false},
		{"ä", false},
		{"a\x00", false},
		{"a\n", false},
	}
	for _, c := range cases {
		err := validateTableName(c.name)
		if c.ok != (err == nil) {
			t.Errorf("validateTableName(%q) = %v, want ok=%v", c.name, err, c.ok)
			continue
		}
		if err == nil {
			continue
		}
		var ce *outboxtype.ConfigError
		if !errors.As(err, &ce) || ce.Field != "Table" || !errors.Is(err, outboxtype.ErrInvalidConfig) {
			t.Errorf("validateTableName(%q) = %#v, want *ConfigError{Field: Table}", c.name, err)
		}
	}
}

func TestIndexNames(t *testing.T) {
	t.Parallel()
	if got := (tableName{name: "outbox_event"}).indexName("_pending_idx"); got != "outbox_event_pending_idx" {
		t.Errorf("got %s", got)
	}
	a := tableName{name: strings.Repeat("a", 60) + "xyz"}
	b := tableName{name: strings.Repeat("a", 60) + "xyw"}
	for _, suffix := range []string{pendingIndexSuffix, deadIndexSuffix, finishedIndexSuffix} {
		ia, ib := a.indexName(suffix), b.indexName(suffix)
		if len(ia) > maxIdentLen || len(ib) > maxIdentLen {
			t.Errorf("index names too long: %s %s", ia, ib)
		}
		if ia == ib {
			t.Errorf("long tables share index name %s", ia)
		}
		if !strings.HasSuffix(ia, suffix) || !identRE.MatchString(ia) {
			t.Errorf("bad index name %s", ia)
		}
	}
}

func FuzzValidateTableName(f *testing.F) {
	for _, s := range []string{"outbox_event", "app.outbox_event", "", "a.b.c", `x"y`, strings.Repeat("z", 64)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		tn, err := parseTableName(name)
		fuzztally.Record(err != nil)
		if err != nil {
			var ce *outboxtype.ConfigError
			if !errors.As(err, &ce) || ce.Field != "Table" {
				t.Fatalf("error is not a Table ConfigError: %#v", err)
			}
			return
		}
		// A valid name is plain ASCII identifiers: it reads back unchanged, quotes
		// without escaping and derives index names that are valid identifiers too.
		if tn.String() != name {
			t.Fatalf("String() = %q, want %q", tn.String(), name)
		}
		if strings.ContainsAny(name, "\"`'; \x00") {
			t.Fatalf("accepted %q", name)
		}
		for _, d := range []*Dialect{Postgres, SQLite} {
			q := d.qualified(tn)
			if strings.Count(q, `"`) != 2*(strings.Count(name, ".")+1) {
				t.Fatalf("%s quoted %q as %s", d.Name(), name, q)
			}
		}
		for _, suffix := range []string{pendingIndexSuffix, deadIndexSuffix, finishedIndexSuffix} {
			if ix := tn.indexName(suffix); len(ix) > maxIdentLen || !identRE.MatchString(ix) {
				t.Fatalf("index name %q for %q", ix, name)
			}
		}
	})
}
