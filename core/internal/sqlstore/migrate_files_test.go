package sqlstore

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Set OUTBOX_UPDATE_MIGRATIONS=1 to rewrite the migration files that package outbox
// embeds (core/migrations) from the dialects' DDL builders.
const updateMigrationsEnv = "OUTBOX_UPDATE_MIGRATIONS"

// coreDir is the directory of package outbox, which embeds core/migrations.
const coreDir = "../.."

// migrationFiles are the files package outbox embeds, as they are on disk.
var migrationFiles = os.DirFS(coreDir)

// migrationFileTexts returns every migration file of d's default table by path.
func migrationFileTexts(d *dialect) map[string]string {
	m := d.ddl(d, tableName{name: DefaultTable})
	files := map[string]string{}
	add := func(version int, name string, up, down []ddlStatement) {
		u, dn := renderDDL(up), renderDDL(down)
		files[fmt.Sprintf("migrations/%s/%04d_%s.up.sql", d.Name(), version, name)] = u
		files[fmt.Sprintf("migrations/%s/%04d_%s.down.sql", d.Name(), version, name)] = dn
		files[fmt.Sprintf("migrations/goose/%s/%05d_%s.sql", d.Name(), version, name)] = "-- +goose Up\n" + u + "\n-- +goose Down\n" + dn
	}
	add(1, "create_outbox_event", m.up, m.down)
	for i, l := range m.later {
		add(i+2, l.name, l.up, l.down)
	}
	return files
}

func TestMigrationFilesMatchDDL(t *testing.T) {
	t.Parallel()
	for _, d := range allDialects {
		want := migrationFileTexts(d)
		for _, dir := range []string{"migrations/" + d.Name(), "migrations/goose/" + d.Name()} {
			entries, err := fs.ReadDir(migrationFiles, dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if _, ok := want[dir+"/"+e.Name()]; !ok {
					t.Errorf("%s/%s is not a migration of the %s DDL builder", dir, e.Name(), d.Name())
				}
			}
		}
		for path, text := range want {
			if os.Getenv(updateMigrationsEnv) != "" {
				if err := os.WriteFile(filepath.Join(coreDir, filepath.FromSlash(path)), []byte(text), 0o644); err != nil {
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

// TestDDLCommentsHaveNoSemicolons: goose and golang-migrate split or send files by
// statement; a semicolon in a comment would cut a statement short in some tools.
func TestDDLCommentsHaveNoSemicolons(t *testing.T) {
	t.Parallel()
	for _, d := range allDialects {
		dd := d
		m := dd.ddl(dd, tableName{schema: "s", name: DefaultTable})
		for _, s := range append(m.up, m.down...) {
			if strings.Contains(s.comment, ";") || strings.Contains(s.sql, ";") {
				t.Errorf("%s: statement or comment contains a semicolon: %q", d.Name(), s)
			}
		}
	}
}
