package outbox

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"strings"
	"testing"
)

var allDialects = []Dialect{Postgres, MySQL, SQLite}

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
