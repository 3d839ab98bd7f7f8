package main

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// wantShapes is the record of testdata/repo/shapes, the line-format fixture.
const wantShapes = `pkg example.com/fixture/shapes, const Big = 1099511627776
pkg example.com/fixture/shapes, const Big ideal-int
pkg example.com/fixture/shapes, const Circle = 1
pkg example.com/fixture/shapes, const Circle Kind
pkg example.com/fixture/shapes, const Enabled = true
pkg example.com/fixture/shapes, const Enabled ideal-bool
pkg example.com/fixture/shapes, const Letter = 120
pkg example.com/fixture/shapes, const Letter ideal-rune
pkg example.com/fixture/shapes, const Name = "shapes"
pkg example.com/fixture/shapes, const Name ideal-string
pkg example.com/fixture/shapes, const Ratio = 1.5
pkg example.com/fixture/shapes, const Ratio ideal-float
pkg example.com/fixture/shapes, const Square = 2
pkg example.com/fixture/shapes, const Square Kind
pkg example.com/fixture/shapes, const Timeout = 3000000000
pkg example.com/fixture/shapes, const Timeout time.Duration
pkg example.com/fixture/shapes, func Leak() unexported
pkg example.com/fixture/shapes, func Map[$0 any, $1 any]([]$0, func($0) $1) []$1
pkg example.com/fixture/shapes, func New() *Shape
pkg example.com/fixture/shapes, func Nothing()
pkg example.com/fixture/shapes, func Sum[$0 Number](...$0) $0
pkg example.com/fixture/shapes, func UseAlias(Alias, Pair[string])
pkg example.com/fixture/shapes, method (*Meta) Touch(time.Time)
pkg example.com/fixture/shapes, method (*Shape) Scale(float64) error
pkg example.com/fixture/shapes, method (*Stack[$0, $1]) Push($0) $1
pkg example.com/fixture/shapes, method (Base) Describe() string
pkg example.com/fixture/shapes, method (DrawFunc) Draw(*Shape) error
pkg example.com/fixture/shapes, method (Shape) Area() float64
pkg example.com/fixture/shapes, method (Shape) Describe() string
pkg example.com/fixture/shapes, method (Shape) Touch(time.Time)
pkg example.com/fixture/shapes, type Alias = Shape
pkg example.com/fixture/shapes, type Base struct
pkg example.com/fixture/shapes, type Base struct, ID string
pkg example.com/fixture/shapes, type DrawFunc func(*Shape) error
pkg example.com/fixture/shapes, type Drawer interface { Close, Draw }
pkg example.com/fixture/shapes, type Drawer interface, Close() error
pkg example.com/fixture/shapes, type Drawer interface, Draw(context.Context, *sql.DB, *Shape) (int, error)
pkg example.com/fixture/shapes, type Kind int
pkg example.com/fixture/shapes, type Meta struct
pkg example.com/fixture/shapes, type Number interface{ ~int | ~int64 | float64 }
pkg example.com/fixture/shapes, type Pair[$0 comparable] = Stack[$0, int]
pkg example.com/fixture/shapes, type Sealed interface { Public, unexported methods }
pkg example.com/fixture/shapes, type Sealed interface, Public()
pkg example.com/fixture/shapes, type Sealed interface, unexported methods
pkg example.com/fixture/shapes, type Shape struct
pkg example.com/fixture/shapes, type Shape struct, Kind Kind ` + "`json:\"kind\"`" + `
pkg example.com/fixture/shapes, type Shape struct, Label string ` + "`json:\"label,omitempty\"`" + `
pkg example.com/fixture/shapes, type Shape struct, OnDraw func(context.Context, ...string) (int, error)
pkg example.com/fixture/shapes, type Shape struct, Options map[string]any
pkg example.com/fixture/shapes, type Shape struct, embedded *Meta
pkg example.com/fixture/shapes, type Shape struct, embedded Base
pkg example.com/fixture/shapes, type Stack[$0 comparable, $1 Number] struct
pkg example.com/fixture/shapes, type Stack[$0 comparable, $1 Number] struct, Items []$0
pkg example.com/fixture/shapes, type Stack[$0 comparable, $1 Number] struct, Sizes map[$0]$1
pkg example.com/fixture/shapes, var ErrNoShape error
pkg example.com/fixture/shapes, var Pairs [2]struct{ A int; B int }
pkg example.com/fixture/shapes, var Registry map[string][]*Shape
pkg example.com/fixture/shapes, var Sink chan<- error
pkg example.com/fixture/shapes, var Updates <-chan Kind
`

// generateFixture returns the record of testdata/repo: a module with a root package,
// a public package, internal/, cmd/, examples/ and testdata packages that are not
// recorded, and a second module (sub/) that imports the first.
func generateFixture(t *testing.T) map[string]string {
	t.Helper()
	// The fixture's modules are in no workspace, whatever go.work may be above them.
	t.Setenv("APIRECORD_GOWORK", "off")
	files, err := generate(filepath.Join("testdata", "repo"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestGenerateFixture(t *testing.T) {
	files := generateFixture(t)
	var names []string
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	if want := []string{"root.txt", "shapes.txt", "sub.txt"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("record files %q, want %q", names, want)
	}
	if got := files["shapes.txt"]; got != wantShapes {
		t.Errorf("shapes.txt:\n%s\nwant:\n%s\ndiff:\n%s", got, wantShapes, lineDiff(wantShapes, got))
	}
	if got, want := files["root.txt"], "pkg example.com/fixture, const Version = \"v0.1.0\"\npkg example.com/fixture, const Version ideal-string\n"; got != want {
		t.Errorf("root.txt:\n%s\nwant:\n%s", got, want)
	}
	if got, want := files["sub.txt"], "pkg example.com/fixture/sub, func Biggest(...shapes.Shape) (shapes.Shape, bool)\n"; got != want {
		t.Errorf("sub.txt:\n%s\nwant:\n%s", got, want)
	}
}

func lineDiff(want, got string) string {
	var b strings.Builder
	w, g := lineSet(want), lineSet(got)
	for _, l := range strings.Split(want, "\n") {
		if l != "" && !g[l] {
			b.WriteString("-" + l + "\n")
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if l != "" && !w[l] {
			b.WriteString("+" + l + "\n")
		}
	}
	return b.String()
}

// TestWriteAndCompare covers -w and -check on a record directory: a fresh record
// matches, a changed, missing or extra file is listed with its lines.
func TestWriteAndCompare(t *testing.T) {
	files := map[string]string{
		"a.txt": "pkg m/a, func F()\npkg m/a, func G(int)\n",
		"b.txt": "pkg m/b, var V int\n",
	}
	dir := filepath.Join(t.TempDir(), "api")
	if diff, err := compareRecord(dir, files); err != nil || !strings.Contains(diff, "api/a.txt: missing") {
		t.Fatalf("no api/ yet: diff %q, err %v", diff, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stale.txt"), []byte("pkg m/stale, func Old()\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("not a record file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeRecord(dir, files); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "stale.txt")); !os.IsNotExist(err) {
		t.Errorf("-w kept a file of no package: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "README.md")); err != nil {
		t.Errorf("-w removed a file that is not a record file: %v", err)
	}
	if diff, err := compareRecord(dir, files); err != nil || diff != "" {
		t.Fatalf("fresh record: diff %q, err %v", diff, err)
	}

	changed := map[string]string{
		"a.txt": "pkg m/a, func F()\npkg m/a, func G(int, string)\n",
		"c.txt": "pkg m/c, func H()\n",
	}
	diff, err := compareRecord(dir, changed)
	if err != nil {
		t.Fatal(err)
	}
	want := `api/a.txt: differs
  -pkg m/a, func G(int)
  +pkg m/a, func G(int, string)
api/b.txt: no such package any more
  -pkg m/b, var V int
api/c.txt: missing (a new package)
  +pkg m/c, func H()
`
	if diff != want {
		t.Errorf("diff:\n%s\nwant:\n%s", diff, want)
	}
}

// TestCheckCommand runs -w then -check on a copy of the fixture repository.
func TestCheckCommand(t *testing.T) {
	t.Setenv("APIRECORD_GOWORK", "off")
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS(filepath.Join("testdata", "repo"))); err != nil {
		t.Fatal(err)
	}
	var out, errOut strings.Builder
	if code := run([]string{"-check", "-root", root}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "make api") {
		t.Fatalf("-check without a record: exit %d, stderr:\n%s", code, errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"-w", "-root", root}, &out, &errOut); code != 0 {
		t.Fatalf("-w: exit %d, stderr:\n%s", code, errOut.String())
	}
	errOut.Reset()
	if code := run([]string{"-check", "-root", root}, &out, &errOut); code != 0 {
		t.Fatalf("-check after -w: exit %d, stderr:\n%s", code, errOut.String())
	}
	// Remove a method: -check lists it as a "-" line and asks for API-Change.
	src := filepath.Join(root, "shapes", "shapes.go")
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), "func (s Shape) Area() float64 { return 0 }", "", 1))
	if err := os.WriteFile(src, b, 0o644); err != nil {
		t.Fatal(err)
	}
	errOut.Reset()
	code := run([]string{"-check", "-root", root}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "  -pkg example.com/fixture/shapes, method (Shape) Area() float64\n") ||
		!strings.Contains(errOut.String(), "API-Change:") {
		t.Fatalf("-check after removing a method: exit %d, stderr:\n%s", code, errOut.String())
	}
}
