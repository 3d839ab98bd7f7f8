package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// gitRepo is a throwaway git repository for the history check.
type gitRepo struct {
	t   *testing.T
	dir string
}

func newGitRepo(t *testing.T) *gitRepo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := t.TempDir()
	// Keep the user's and the system's git configuration out (for the tool's own git
	// calls too) and give the commits an author.
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("HOME", dir)
	t.Setenv("GIT_AUTHOR_NAME", "Test")
	t.Setenv("GIT_AUTHOR_EMAIL", "test@example.com")
	t.Setenv("GIT_COMMITTER_NAME", "Test")
	t.Setenv("GIT_COMMITTER_EMAIL", "test@example.com")
	r := &gitRepo{t: t, dir: dir}
	r.git("init", "-q", "-b", "main")
	return r
}

func (r *gitRepo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = r.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit writes files (content "" removes the file) and commits them with msg; it
// returns the commit's hash.
func (r *gitRepo) commit(msg string, files map[string]string) string {
	r.t.Helper()
	for name, content := range files {
		path := filepath.Join(r.dir, name)
		if content == "" {
			r.git("rm", "-q", name)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			r.t.Fatal(err)
		}
		r.git("add", name)
	}
	r.git("commit", "-q", "--allow-empty", "-m", msg)
	return r.git("rev-parse", "HEAD")
}

func hashes(bad []offense) []string {
	var hs []string
	for _, b := range bad {
		hs = append(hs, b.Hash)
	}
	return hs
}

func TestHistory(t *testing.T) {
	r := newGitRepo(t)
	const (
		v1 = "pkg m/core, func New(Config) *Outbox\npkg m/core, type Config struct\n"
		v2 = v1 + "pkg m/core, type Config struct, Workers int\n"
		v3 = "pkg m/core, func New(context.Context, Config) *Outbox\npkg m/core, type Config struct\npkg m/core, type Config struct, Workers int\n"
	)
	// History from before the record: no api/ at all.
	r.commit("start", map[string]string{"README": "outbox\n"})
	if bad, n, err := checkHistory(r.dir, "HEAD"); err != nil || n != 0 || len(bad) != 0 {
		t.Fatalf("no api/ yet: %v %d %v", bad, n, err)
	}
	r.commit("api: the first record", map[string]string{"api/core.txt": v1, "api/notes.md": "one\ntwo\n"})
	r.commit("core: Config.Workers", map[string]string{"api/core.txt": v2}) // an addition
	r.commit("api: notes", map[string]string{"api/notes.md": "one\n"})      // not a record file
	good := r.commit("core: New takes a context\n\nAPI-Change: New needs the caller's context for its start-up queries.\n",
		map[string]string{"api/core.txt": v3})

	bad, n, err := checkHistory(r.dir, "HEAD")
	if err != nil || len(bad) != 0 || n != 3 {
		t.Fatalf("compatible history: offenses %+v, %d commits, err %v", bad, n, err)
	}
	var out, errOut strings.Builder
	if code := run([]string{"-history", "-root", r.dir}, &out, &errOut); code != 0 {
		t.Fatalf("-history on a good history: exit %d\n%s", code, errOut.String())
	}

	// A branch removes a line without a reason (an empty API-Change: line does not
	// count) and is merged: the branch commit is the offender, not the merge.
	r.git("checkout", "-q", "-b", "side")
	side := r.commit("core: drop Workers\n\nAPI-Change:\n", map[string]string{
		"api/core.txt": "pkg m/core, func New(context.Context, Config) *Outbox\npkg m/core, type Config struct\n",
	})
	r.git("checkout", "-q", "main")
	r.commit("docs", map[string]string{"README": "outbox, the library\n"})
	r.git("merge", "-q", "--no-ff", "-m", "Merge branch side", "side")
	// A package's file deleted without a reason.
	r.commit("api: gorm adapter", map[string]string{"api/gorm.txt": "pkg m/gorm, func Write()\n"})
	deleted := r.commit("drop the gorm adapter", map[string]string{"api/gorm.txt": ""})
	// A change with a reason after the bad ones passes.
	r.commit("core: Workers back\n\nBody text.\nAPI-Change: Workers is back; New loses the context again.\n",
		map[string]string{"api/core.txt": v2})

	bad, n, err = checkHistory(r.dir, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{side, deleted}; !reflect.DeepEqual(hashes(bad), want) {
		t.Fatalf("offenders %+v, want %q", bad, want)
	}
	// The first record, Workers, the context, the side commit, the merge (it changes
	// api/core.txt on main), the gorm file's two commits and Workers back.
	if n != 8 {
		t.Errorf("%d commits touch the record, want 8", n)
	}
	if want := []string{"api/core.txt: pkg m/core, type Config struct, Workers int"}; !reflect.DeepEqual(bad[0].Removed, want) {
		t.Errorf("side commit removes %q, want %q", bad[0].Removed, want)
	}
	if bad[0].Subject != "core: drop Workers" {
		t.Errorf("subject %q", bad[0].Subject)
	}
	if want := []string{"api/gorm.txt: (deleted)", "api/gorm.txt: pkg m/gorm, func Write()"}; !reflect.DeepEqual(bad[1].Removed, want) {
		t.Errorf("deleting commit removes %q, want %q", bad[1].Removed, want)
	}

	out.Reset()
	errOut.Reset()
	code := run([]string{"-history", "-root", r.dir}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), side[:12]+" core: drop Workers") ||
		!strings.Contains(errOut.String(), deleted[:12]+" drop the gorm adapter") {
		t.Fatalf("-history on a bad history: exit %d\n%s", code, errOut.String())
	}
	// Commits already on main cannot be reworded: api/accepted-changes lists them.
	accepted := filepath.Join(r.dir, "api", "accepted-changes")
	if err := os.WriteFile(accepted, []byte("# commits without API-Change:\n"+side[:12]+" Workers went unused.\n"+deleted+" the gorm adapter moved out\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if bad, _, err := checkHistory(r.dir, "HEAD"); err != nil || len(bad) != 0 {
		t.Fatalf("with both offenders accepted: %+v, %v", bad, err)
	}
	if err := os.WriteFile(accepted, []byte(side[:12]+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := checkHistory(r.dir, "HEAD"); err == nil || !strings.Contains(err.Error(), "accepted-changes:1") {
		t.Fatalf("an accepted commit without a reason: err %v", err)
	}
	if err := os.Remove(accepted); err != nil {
		t.Fatal(err)
	}

	// -rev checks the history up to another commit.
	errOut.Reset()
	if code := run([]string{"-history", "-rev", good, "-root", r.dir}, &out, &errOut); code != 0 {
		t.Fatalf("-history -rev %s: exit %d\n%s", good, code, errOut.String())
	}
}

// TestHistoryEvilMerge: a merge whose result removes a line that neither parent
// removed needs the reason in the merge's own message.
func TestHistoryEvilMerge(t *testing.T) {
	r := newGitRepo(t)
	r.commit("api", map[string]string{"api/core.txt": "pkg m/core, func A()\npkg m/core, func B()\npkg m/core, func C()\n"})
	r.git("checkout", "-q", "-b", "side")
	r.commit("add D", map[string]string{"api/core.txt": "pkg m/core, func A()\npkg m/core, func B()\npkg m/core, func C()\npkg m/core, func D()\n"})
	r.git("checkout", "-q", "main")
	r.commit("add Z", map[string]string{"api/core.txt": "pkg m/core, func A()\npkg m/core, func B()\npkg m/core, func C()\npkg m/core, func Z()\n"})
	// Merge, resolving the conflict and also dropping B.
	cmd := exec.Command("git", "merge", "-q", "side")
	cmd.Dir = r.dir
	_ = cmd.Run() // conflicts
	merge := r.commit("Merge branch side", map[string]string{"api/core.txt": "pkg m/core, func A()\npkg m/core, func C()\npkg m/core, func D()\npkg m/core, func Z()\n"})
	bad, _, err := checkHistory(r.dir, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) != 1 || bad[0].Hash != merge || !reflect.DeepEqual(bad[0].Removed, []string{"api/core.txt: pkg m/core, func B()"}) {
		t.Fatalf("offenders %+v, want the merge %s removing B", bad, merge)
	}
}
