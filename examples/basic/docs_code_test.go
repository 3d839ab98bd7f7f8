package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	outbox "github.com/outboxkit/outbox/core"
)

// TestConfigurationPageListsEveryConfigField keeps docs/configuration.md's table in step
// with outbox.Config: every exported field has a row (a row's first cell may name several,
// "`HotQueueSize` / `ColdQueueSize`"), and every field a row names exists.
func TestConfigurationPageListsEveryConfigField(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(filepath.Join(repoRoot, "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	code := regexp.MustCompile("`([A-Za-z]+)`")
	rows := map[string]bool{}
	for line := range strings.Lines(string(src)) {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "|") || len(cells) < 3 {
			continue
		}
		for _, m := range code.FindAllStringSubmatch(cells[1], -1) {
			rows[m[1]] = true
		}
	}
	fields := map[string]bool{}
	for f := range reflect.TypeFor[outbox.Config]().Fields() {
		if !f.IsExported() {
			continue
		}
		fields[f.Name] = true
		if !rows[f.Name] {
			t.Errorf("docs/configuration.md has no row for Config.%s: add one with its default and meaning", f.Name)
		}
	}
	if len(fields) < 10 {
		t.Fatalf("found only %d Config fields", len(fields))
	}
	for name := range rows {
		if !fields[name] {
			t.Errorf("docs/configuration.md has a row for %s, which is not a field of outbox.Config", name)
		}
	}
}

// TestDatabasesPageNamesEveryMigration: the versions table of docs/databases.md names
// every migration file outbox.Migrations returns, for every database.
func TestDatabasesPageNamesEveryMigration(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(filepath.Join(repoRoot, "docs", "databases.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []outbox.Dialect{outbox.Postgres, outbox.MySQL, outbox.SQLite} {
		ups, err := fs.Glob(outbox.Migrations(d), "*.up.sql")
		if err != nil || len(ups) == 0 {
			t.Fatalf("%s: no migration files (%v)", d.Name(), err)
		}
		for _, up := range ups {
			if version := strings.TrimSuffix(up, ".up.sql"); !strings.Contains(string(src), "`"+version+"`") {
				t.Errorf("docs/databases.md does not name %s's migration %s", d.Name(), version)
			}
		}
	}
}
