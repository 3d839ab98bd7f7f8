package outbox

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Set OUTBOX_UPDATE_MIGRATIONS=1 to rewrite the embedded migration files from the
// dialects' DDL builders.
const updateMigrationsEnv = "OUTBOX_UPDATE_MIGRATIONS"

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
		want := migrationFileTexts(d.builder())
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
		ups, err := fs.Glob(Migrations(d), "*.up.sql")
		if err != nil || len(ups) == 0 {
			t.Fatalf("%s: no up files (%v)", d.Name(), err)
		}
		for _, upName := range ups {
			base := strings.TrimSuffix(upName, ".up.sql")
			up := read(Migrations(d), upName)
			down := read(Migrations(d), base+".down.sql")
			goose := read(GooseMigrations(d), "0"+base+".sql")
			if want := "-- +goose Up\n" + up + "\n-- +goose Down\n" + down; goose != want {
				t.Errorf("%s: goose file 0%s.sql is not the up and down files joined:\n%s", d.Name(), base, goose)
			}
		}
		entries, err := fs.ReadDir(Migrations(d), ".")
		if err != nil || len(entries) != 2*len(ups) {
			t.Errorf("%s: Migrations has %d entries (%v), want an up and a down file per version", d.Name(), len(entries), err)
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

// TestMigrationsDocNamesEveryVersion: the doc comment of Migrations names every version
// file it returns, for every dialect.
func TestMigrationsDocNamesEveryVersion(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "migrate.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var doc string
	for _, decl := range f.Decls {
		if fn, ok := decl.(*ast.FuncDecl); ok && fn.Name.Name == "Migrations" && fn.Recv == nil {
			doc = fn.Doc.Text()
		}
	}
	if doc == "" {
		t.Fatal("no doc comment of Migrations in migrate.go")
	}
	for _, d := range allDialects {
		ups, err := fs.Glob(Migrations(d), "*.up.sql")
		if err != nil || len(ups) == 0 {
			t.Fatalf("%s: no up files (%v)", d.Name(), err)
		}
		for _, up := range ups {
			if version := strings.TrimSuffix(up, ".up.sql"); !strings.Contains(doc, version) {
				t.Errorf("the doc of Migrations does not name %s's version %s", d.Name(), version)
			}
		}
	}
}
