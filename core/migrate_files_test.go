package outbox

import (
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
