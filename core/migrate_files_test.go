package outbox

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Set OUTBOX_UPDATE_MIGRATIONS=1 to rewrite the embedded migration files from the
// dialects' DDL builders.
const updateMigrationsEnv = "OUTBOX_UPDATE_MIGRATIONS"

func migrationFileTexts(d *dialect) (up, down, goose string) {
	m := d.ddl(d, tableName{name: DefaultTable})
	up, down = renderDDL(m.up), renderDDL(m.down)
	return up, down, "-- +goose Up\n" + up + "\n-- +goose Down\n" + down
}

func TestMigrationFilesMatchDDL(t *testing.T) {
	t.Parallel()
	for _, d := range allDialects {
		up, down, goose := migrationFileTexts(d.builder())
		want := map[string]string{
			"migrations/" + d.Name() + "/0001_create_outbox_event.up.sql":     up,
			"migrations/" + d.Name() + "/0001_create_outbox_event.down.sql":   down,
			"migrations/goose/" + d.Name() + "/00001_create_outbox_event.sql": goose,
		}
		for path, text := range want {
			if os.Getenv(updateMigrationsEnv) != "" {
				if err := os.WriteFile(filepath.FromSlash(path), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := fs.ReadFile(migrationFiles, path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != text {
				t.Errorf("%s differs from the %s DDL builder; run with %s=1 to rewrite it.\ngot:\n%s\nwant:\n%s",
					path, d.Name(), updateMigrationsEnv, got, text)
			}
		}
	}
}

// TestGooseFileJoinsUpAndDown checks the goose file against the golang-migrate files as
// shipped, independently of the builder.
func TestGooseFileJoinsUpAndDown(t *testing.T) {
	t.Parallel()
	for _, d := range allDialects {
		read := func(fsys fs.FS, name string) string {
			t.Helper()
			b, err := fs.ReadFile(fsys, name)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		up := read(Migrations(d), "0001_create_outbox_event.up.sql")
		down := read(Migrations(d), "0001_create_outbox_event.down.sql")
		goose := read(GooseMigrations(d), "00001_create_outbox_event.sql")
		if want := "-- +goose Up\n" + up + "\n-- +goose Down\n" + down; goose != want {
			t.Errorf("%s: goose file is not the up and down files joined:\n%s", d.Name(), goose)
		}
		entries, err := fs.ReadDir(Migrations(d), ".")
		if err != nil || len(entries) != 2 {
			t.Errorf("%s: Migrations has %d entries (%v), want the up and down files", d.Name(), len(entries), err)
		}
	}
}

// TestDDLCommentsHaveNoSemicolons: goose and golang-migrate split or send files by
// statement; a semicolon in a comment would cut a statement short in some tools.
func TestDDLCommentsHaveNoSemicolons(t *testing.T) {
	t.Parallel()
	for _, d := range allDialects {
		dd := d.builder()
		m := dd.ddl(dd, tableName{schema: "s", name: DefaultTable})
		for _, s := range append(m.up, m.down...) {
			if strings.Contains(s.comment, ";") || strings.Contains(s.sql, ";") {
				t.Errorf("%s: statement or comment contains a semicolon: %q", d.Name(), s)
			}
		}
	}
}
