package main

import (
	"archive/zip"
	"bytes"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const zero = "v0.0.0-00010101000000-000000000000"

// fixture is a throwaway repository shaped like this one: a root module, a published
// adapter, a published command that requires both, and an unpublished test module.
type fixture struct {
	t   *testing.T
	dir string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	// Keep the user's and the system's git configuration out (for the tool's own git
	// calls too) and give the commits an author.
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_AUTHOR_NAME", "Test")
	t.Setenv("GIT_AUTHOR_EMAIL", "test@example.com")
	t.Setenv("GIT_COMMITTER_NAME", "Test")
	t.Setenv("GIT_COMMITTER_EMAIL", "test@example.com")
	// The fixture is not this repository: no make api-check.
	old := apiCheck
	apiCheck = func(string) (string, error) { return "", nil }
	t.Cleanup(func() { apiCheck = old })

	f := &fixture{t: t, dir: t.TempDir()}
	f.write("go.work", "go 1.25.0\n\nuse (\n\t.\n\t./adapters/a\n\t./cmd/c\n\t./internal/t\n)\n\n"+
		"replace (\n\texample.com/r "+zero+" => ./\n\texample.com/r/adapters/a "+zero+" => ./adapters/a\n)\n")
	f.write("go.mod", "module example.com/r\n\ngo 1.25.0\n")
	f.write("LICENSE", "license\n")
	f.write("CHANGELOG.md", "# Changelog\n\n## [Unreleased]\n\n## [1.2.0] - 2025-01-02\n\n## [1.3.0] - unreleased\n")
	f.write("core/core.go", "package core\n\nconst Name = \"core\"\n")
	f.write(".gitignore", "ignored.txt\n")
	f.write("adapters/a/go.mod", "module example.com/r/adapters/a\n\ngo 1.25.0\n\nrequire example.com/r "+zero+"\n")
	f.write("adapters/a/LICENSE", "license\n")
	f.write("adapters/a/a.go", "package a\n\nimport \"example.com/r/core\"\n\nconst Name = core.Name\n")
	f.write("cmd/c/go.mod", "module example.com/r/cmd/c\n\ngo 1.25.0\n\nrequire example.com/r/adapters/a "+zero+"\n\nrequire example.com/r "+zero+" // indirect\n")
	f.write("cmd/c/LICENSE", "license\n")
	f.write("cmd/c/main.go", "package main\n\nimport \"example.com/r/adapters/a\"\n\nfunc main() { println(a.Name) }\n")
	f.write("internal/t/go.mod", "module example.com/r/internal/t\n\ngo 1.25.0\n\nrequire example.com/r/adapters/a "+zero+"\n\nrequire example.com/r "+zero+" // indirect\n")
	f.write("internal/t/t.go", "package t\n\nimport \"example.com/r/adapters/a\"\n\nconst Name = a.Name\n")
	f.git("init", "-q", "-b", "main")
	f.git("add", "-A")
	f.git("commit", "-q", "-m", "fixture")
	return f
}

func (f *fixture) write(name, content string) {
	f.t.Helper()
	p := filepath.Join(f.dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) read(name string) string {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, filepath.FromSlash(name)))
	if err != nil {
		f.t.Fatal(err)
	}
	return string(b)
}

func (f *fixture) git(args ...string) string {
	f.t.Helper()
	out, err := git(f.dir, args...)
	if err != nil {
		f.t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// run runs the command with args (after -root) and returns its output and status.
func (f *fixture) run(args ...string) (string, int) {
	f.t.Helper()
	var out bytes.Buffer
	code := run(append([]string{"-root", f.dir}, args...), &out, &out)
	return out.String(), code
}

func TestWorkspace(t *testing.T) {
	f := newFixture(t)
	ws, err := loadWorkspace(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	var pub []string
	for _, m := range ws.published() {
		pub = append(pub, m.Rel+" "+m.Tag("v1.0.0"))
	}
	if want := []string{". v1.0.0", "adapters/a adapters/a/v1.0.0", "cmd/c cmd/c/v1.0.0"}; !slices.Equal(pub, want) {
		t.Fatalf("published: %q, want %q", pub, want)
	}
	out, code := f.run("list")
	if code != 0 || out != ".\nadapters/a\ncmd/c\n" {
		t.Fatalf("list: %d %q", code, out)
	}
}

func TestCheck(t *testing.T) {
	f := newFixture(t)
	if out, code := f.run("check"); code != 0 {
		t.Fatalf("check of a good tree: %d\n%s", code, out)
	}
	f.write("cmd/c/go.mod", f.read("cmd/c/go.mod")+"\nrequire example.com/r/internal/t "+zero+"\n\nreplace example.com/other => ../other\n")
	f.write("adapters/a/LICENSE", "another license\n")
	f.write("internal/t/go.mod", f.read("internal/t/go.mod")+"\nreplace example.com/r/adapters/a => ../../adapters/a\n")
	out, code := f.run("check")
	if code != 1 {
		t.Fatalf("check: %d, want 1\n%s", code, out)
	}
	for _, want := range []string{
		"cmd/c/go.mod requires example.com/r/internal/t, which is not published",
		"cmd/c/go.mod has replace directives",
		"adapters/a/LICENSE is missing or differs",
		"internal/t/go.mod replaces example.com/r/adapters/a",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check's output lacks %q:\n%s", want, out)
		}
	}
}

func TestChangelogProblem(t *testing.T) {
	f := newFixture(t)
	name := filepath.Join(f.dir, "CHANGELOG.md")
	for v, want := range map[string]string{
		"v1.2.0": "",
		"v1.3.0": "still says unreleased",
		"v1.4.0": "no section for v1.4.0",
		"v1.2":   "no section",
	} {
		got := changelogProblem(name, v)
		if want == "" && got != "" || want != "" && !strings.Contains(got, want) {
			t.Errorf("changelogProblem(%s) = %q, want %q", v, got, want)
		}
	}
}

func TestReleaseRefuses(t *testing.T) {
	f := newFixture(t)
	f.git("tag", "cmd/c/v1.2.0")
	f.write("new.go", "package r\n")
	f.write("ignored.txt", "ignored\n")
	apiCheck = func(string) (string, error) { return "api/ differs", exec.ErrNotFound }
	for _, args := range [][]string{{"-version", "v1.2.0"}, {"-version", "v1.2.0", "-tag"}} {
		out, code := f.run(append([]string{"release"}, args...)...)
		if code != 1 {
			t.Fatalf("release %q: %d, want 1\n%s", args, code, out)
		}
		for _, want := range []string{"refused", "?? new.go", "make api-check", "api/ differs", "the tag cmd/c/v1.2.0 exists"} {
			if !strings.Contains(out, want) {
				t.Errorf("release %q: the output lacks %q:\n%s", args, want, out)
			}
		}
		if strings.Contains(out, "ignored.txt") {
			t.Errorf("release %q: an ignored file counts as a change:\n%s", args, out)
		}
	}
	if out, code := f.run("release", "-version", "v1.3.0", "-skip-checks", "-tag"); code != 1 || !strings.Contains(out, "dry runs only") {
		t.Errorf("-skip-checks -tag: %d\n%s", code, out)
	}
	if out, code := f.run("release", "-version", "1.3.0"); code != 1 || !strings.Contains(out, "semantic version") {
		t.Errorf("version 1.3.0: %d\n%s", code, out)
	}
	if tags := f.git("tag"); tags != "cmd/c/v1.2.0" {
		t.Errorf("tags after refused releases: %q", tags)
	}
}

func TestReleaseDryRun(t *testing.T) {
	f := newFixture(t)
	f.write("core/new.go", "package core\n\nconst New = 1\n") // a change: -skip-checks lets it through
	f.write("ignored.txt", "ignored\n")
	before := f.git("status", "--porcelain")
	out := t.TempDir()
	stdout, code := f.run("release", "-version", "v1.3.0", "-out", out, "-skip-checks")
	if code != 0 {
		t.Fatalf("dry run: %d\n%s", code, stdout)
	}
	if after := f.git("status", "--porcelain"); after != before || f.git("tag") != "" {
		t.Fatalf("the dry run changed the repository: %q, tags %q", after, f.git("tag"))
	}
	_, tags, _ := strings.Cut(stdout, "in dependency order")
	if i, j, k := strings.Index(tags, "\tv1.3.0 "), strings.Index(tags, "\tadapters/a/v1.3.0 "), strings.Index(tags, "\tcmd/c/v1.3.0 "); i < 0 || i > j || j > k {
		t.Errorf("the tags are not in dependency order:\n%s", stdout)
	}
	proxy := filepath.Join(out, "proxy")
	for _, m := range []string{"example.com/r", "example.com/r/adapters/a", "example.com/r/cmd/c"} {
		for _, ext := range []string{".info", ".mod", ".zip"} {
			if _, err := os.Stat(filepath.Join(proxy, m, "@v", "v1.3.0"+ext)); err != nil {
				t.Errorf("proxy: %v", err)
			}
		}
		if list, err := os.ReadFile(filepath.Join(proxy, m, "@v", "list")); err != nil || string(list) != "v1.3.0\n" {
			t.Errorf("proxy: %s list %q, %v", m, list, err)
		}
	}
	if _, err := os.Stat(filepath.Join(proxy, "example.com/r/internal/t")); !os.IsNotExist(err) {
		t.Errorf("the unpublished module is in the proxy: %v", err)
	}
	mod, err := os.ReadFile(filepath.Join(proxy, "example.com/r/cmd/c/@v/v1.3.0.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "require example.com/r/adapters/a v1.3.0\n\nrequire example.com/r v1.3.0 // indirect\n"; !strings.Contains(string(mod), want) {
		t.Errorf("cmd/c's go.mod:\n%s\nwant it to hold\n%s", mod, want)
	}

	files := zipFiles(t, filepath.Join(proxy, "example.com/r/@v/v1.3.0.zip"))
	want := []string{".gitignore", "CHANGELOG.md", "LICENSE", "core/core.go", "core/new.go", "go.mod", "go.work"}
	if names := slices.Sorted(maps.Keys(files)); !slices.Equal(names, want) {
		t.Errorf("the root module's zip holds %q, want %q (no nested module, no ignored file)", names, want)
	}
	// Every module requires the others at the release, internal/t too.
	if w := files["go.work"]; !strings.HasSuffix(w, "replace (\n\texample.com/r v1.3.0 => ./\n\texample.com/r/adapters/a v1.3.0 => ./adapters/a\n)\n") || strings.Contains(w, zero) {
		t.Errorf("the released go.work:\n%s", w)
	}
	a := zipFiles(t, filepath.Join(proxy, "example.com/r/adapters/a/@v/v1.3.0.zip"))
	if got := a["go.mod"]; got != "module example.com/r/adapters/a\n\ngo 1.25.0\n\nrequire example.com/r v1.3.0\n" {
		t.Errorf("adapters/a's zipped go.mod:\n%s", got)
	}
	if _, ok := a["a.go"]; !ok || len(a) != 3 {
		t.Errorf("adapters/a's zip: %q", slices.Sorted(maps.Keys(a)))
	}
}

func TestReleaseTags(t *testing.T) {
	f := newFixture(t)
	f.write("CHANGELOG.md", strings.Replace(f.read("CHANGELOG.md"), "[1.3.0] - unreleased", "[1.3.0] - 2025-02-03", 1))
	f.git("commit", "-q", "-am", "changelog")
	out, code := f.run("release", "-version", "v1.3.0", "-tag")
	if code != 0 {
		t.Fatalf("release: %d\n%s", code, out)
	}
	if s := f.git("status", "--porcelain"); s != "" {
		t.Fatalf("the release left changes: %q", s)
	}
	if msg := f.git("log", "-1", "--format=%s"); !strings.HasPrefix(msg, "release v1.3.0") {
		t.Fatalf("last commit: %q", msg)
	}
	head := f.git("rev-parse", "HEAD")
	for _, tag := range []string{"v1.3.0", "adapters/a/v1.3.0", "cmd/c/v1.3.0"} {
		if c := f.git("rev-parse", tag+"^{commit}"); c != head {
			t.Errorf("tag %s is at %s, want HEAD %s", tag, c, head)
		}
	}
	if got := f.git("show", "cmd/c/v1.3.0:cmd/c/go.mod"); !strings.Contains(got, "example.com/r/adapters/a v1.3.0") {
		t.Errorf("cmd/c/go.mod at the tag:\n%s", got)
	}
	if got := f.read("internal/t/go.mod"); !strings.Contains(got, "example.com/r/adapters/a v1.3.0") {
		t.Errorf("the unpublished module's requirement of a published one:\n%s", got)
	}
	if out, code := f.run("check"); code != 0 {
		t.Errorf("check after the release: %d\n%s", code, out)
	}
	if out, code := f.run("release", "-version", "v1.3.0"); code != 1 || !strings.Contains(out, "the tag v1.3.0 exists") {
		t.Errorf("releasing v1.3.0 again: %d\n%s", code, out)
	}
}

func TestTidy(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	f := newFixture(t)
	if out, code := f.run("tidy", "-diff"); code != 0 {
		t.Fatalf("tidy -diff of a tidy tree: %d\n%s", code, out)
	}
	// cmd/c stops requiring adapters/a, and go.work lacks the replace of the version
	// internal/t requires it at: both untidy.
	f.write("cmd/c/main.go", "package main\n\nimport \"example.com/r/core\"\n\nfunc main() { println(core.Name) }\n")
	f.write("go.work", strings.Replace(f.read("go.work"), "\texample.com/r/adapters/a "+zero+" => ./adapters/a\n", "", 1))
	out, code := f.run("tidy", "-diff")
	if code != 1 || !strings.Contains(out, "not tidy: cmd/c, go.work") {
		t.Fatalf("tidy -diff: %d\n%s", code, out)
	}
	if s := f.git("status", "--porcelain"); s != "M cmd/c/main.go\n M go.work" && s != "M cmd/c/main.go\n M go.work\n" {
		t.Fatalf("tidy -diff wrote: %q", s)
	}
	if out, code := f.run("tidy"); code != 0 {
		t.Fatalf("tidy: %d\n%s", code, out)
	}
	if got := f.read("cmd/c/go.mod"); got != "module example.com/r/cmd/c\n\ngo 1.25.0\n\nrequire example.com/r "+zero+"\n" {
		t.Errorf("cmd/c/go.mod after tidy:\n%s", got)
	}
	if !strings.Contains(f.read("go.work"), "example.com/r/adapters/a "+zero+" => ./adapters/a") {
		t.Errorf("go.work after tidy:\n%s", f.read("go.work"))
	}
	if out, code := f.run("tidy", "-diff"); code != 0 {
		t.Fatalf("tidy -diff after tidy: %d\n%s", code, out)
	}
}

// zipFiles returns the files of a module zip, by their path in the module.
func zipFiles(t *testing.T, name string) map[string]string {
	t.Helper()
	r, err := zip.OpenReader(name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	files := map[string]string{}
	for _, f := range r.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if _, err := b.ReadFrom(rc); err != nil {
			t.Fatal(err)
		}
		rc.Close()
		_, rest, _ := strings.Cut(f.Name, "@") // module@version/path
		_, rel, _ := strings.Cut(rest, "/")
		files[rel] = b.String()
	}
	return files
}
