package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

// releaseOpts are the flags of the release command.
type releaseOpts struct {
	version    string // vX.Y.Z
	tag        bool   // commit and tag; otherwise a dry run
	out        string // dry run: where the module proxy is written
	skipChecks bool   // dry run: skip the refusals
}

// release makes a release, or with !o.tag, a dry run of one.
//
// A release refuses to run on a tree with changes or untracked files, when the API
// record in api/ does not match the code (make api-check), when CHANGELOG.md has no
// section for the version or the section's heading still says "unreleased", and when
// a tag it would create exists. Then it sets every requirement of a published module of
// the repository, in every go.mod of the workspace, to the version, commits that, and
// tags every published module at the commit, the modules it requires first. It pushes
// nothing.
//
// A dry run checks the same, and writes the published modules at the version, with
// those requirements, to a module proxy directory (layout <module>/@v/<version>.info,
// .mod, .zip and list, zips made as the go command makes them), from the files of the
// work tree that git tracks or does not ignore. It changes nothing in the repository.
func release(ws *workspace, o releaseOpts, stdout, stderr io.Writer) error {
	v := o.version
	if !semver.IsValid(v) || semver.Canonical(v) != v || semver.Build(v) != "" {
		return fmt.Errorf("version %q: want a semantic version vX.Y.Z (or vX.Y.Z-pre)", v)
	}
	if major := semver.Major(v); major != "v0" && major != "v1" {
		return fmt.Errorf("version %s: a major version above v1 needs /%s module paths", v, major)
	}
	if o.tag && o.skipChecks {
		return fmt.Errorf("-skip-checks is for dry runs only")
	}
	if o.tag && o.out != "" {
		return fmt.Errorf("-out is for dry runs only")
	}
	if !o.skipChecks {
		if problems := releaseChecks(ws, v); len(problems) > 0 {
			return fmt.Errorf("release %s refused:\n\t%s", v, strings.Join(problems, "\n\t"))
		}
	}
	mods, err := requireVersion(ws, v)
	if err != nil {
		return err
	}
	gomods := map[string][]byte{}
	for rel, c := range mods {
		gomods[rel] = c.new
	}
	oldWork, err := os.ReadFile(filepath.Join(ws.Root, "go.work"))
	if err != nil {
		return err
	}
	work, err := workReplaces(ws, gomods)
	if err != nil {
		return err
	}
	order, err := tagOrder(ws, mods)
	if err != nil {
		return err
	}
	var changed []string
	for _, m := range ws.Modules {
		if c := mods[m.Rel]; !bytes.Equal(c.old, c.new) {
			changed = append(changed, path.Join(m.Rel, "go.mod"))
		}
	}
	if !bytes.Equal(oldWork, work) {
		changed = append(changed, "go.work")
	}
	if !o.tag {
		out := o.out
		if out == "" {
			if out, err = os.MkdirTemp("", "outbox-release-"+v+"-"); err != nil {
				return err
			}
		}
		proxy := filepath.Join(out, "proxy")
		if err := writeProxy(ws, v, mods, work, proxy); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "release %s: a dry run; nothing in the repository changed\n", v)
		printPlan(stdout, ws, v, changed, order)
		fmt.Fprintf(stdout, "the published modules at %s, as the module proxy would serve them: %s\n", v, proxy)
		fmt.Fprintf(stdout, "to release: make release VERSION=%s RELEASE=1\n", v)
		return nil
	}

	for _, m := range ws.Modules {
		if c := mods[m.Rel]; !bytes.Equal(c.old, c.new) {
			if err := os.WriteFile(filepath.Join(m.Dir, "go.mod"), c.new, 0o644); err != nil {
				return err
			}
		}
	}
	if err := os.WriteFile(filepath.Join(ws.Root, "go.work"), work, 0o644); err != nil {
		return err
	}
	if len(changed) > 0 {
		if _, err := git(ws.Root, append([]string{"add", "--"}, changed...)...); err != nil {
			return err
		}
		msg := fmt.Sprintf("release %s: the published modules require each other at %s", v, v)
		if _, err := git(ws.Root, "commit", "-q", "-m", msg); err != nil {
			return err
		}
	}
	for _, m := range order {
		if _, err := git(ws.Root, "tag", "-a", m.Tag(v), "-m", m.Path+" "+v); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "release %s: done\n", v)
	printPlan(stdout, ws, v, changed, order)
	var tags []string
	for _, m := range order {
		tags = append(tags, m.Tag(v))
	}
	fmt.Fprintf(stdout, "push the commit, then the tags in this order:\n\tgit push origin HEAD\n\tgit push origin %s\n", strings.Join(tags, " "))
	return nil
}

// printPlan prints what a release does (or did).
func printPlan(w io.Writer, ws *workspace, v string, changed []string, order []*repoMod) {
	if len(changed) > 0 {
		fmt.Fprintf(w, "commit: the requirements of the published modules at %s (and go.work's replaces of them), in\n", v)
		for _, c := range changed {
			fmt.Fprintf(w, "\t%s\n", c)
		}
	} else {
		fmt.Fprintf(w, "commit: none (every requirement of a published module is %s already)\n", v)
	}
	fmt.Fprintf(w, "tags, in dependency order (%d published modules):\n", len(order))
	width := 0
	for _, m := range order {
		width = max(width, len(m.Tag(v)))
	}
	for _, m := range order {
		fmt.Fprintf(w, "\t%-*s  %s\n", width, m.Tag(v), m.Path)
	}
}

// releaseChecks returns the reasons to refuse releasing v.
func releaseChecks(ws *workspace, v string) []string {
	var problems []string
	if out, err := git(ws.Root, "status", "--porcelain"); err != nil {
		problems = append(problems, err.Error())
	} else if out != "" {
		problems = append(problems, "the work tree has changes or untracked files (git status):\n\t\t"+strings.ReplaceAll(strings.TrimRight(out, "\n"), "\n", "\n\t\t"))
	}
	if out, err := apiCheck(ws.Root); err != nil {
		problems = append(problems, fmt.Sprintf("make api-check: %v: the API record in api/ does not match the code (docs/API.md):\n\t\t%s",
			err, strings.ReplaceAll(strings.TrimSpace(lastLines(out, 15)), "\n", "\n\t\t")))
	}
	if p := changelogProblem(filepath.Join(ws.Root, "CHANGELOG.md"), v); p != "" {
		problems = append(problems, p)
	}
	for _, m := range ws.published() {
		if out, err := git(ws.Root, "tag", "-l", m.Tag(v)); err != nil {
			problems = append(problems, err.Error())
		} else if out != "" {
			problems = append(problems, "the tag "+m.Tag(v)+" exists")
		}
	}
	return problems
}

// apiCheck runs make api-check in root and returns its output. The tests replace it.
var apiCheck = func(root string) (string, error) {
	cmd := exec.Command("make", "--no-print-directory", "api-check")
	cmd.Dir = root
	// This program runs with GOWORK=off (internal/tools is in no workspace); the API
	// record loads the repository's packages with the caller's GOWORK, which must be
	// go.work's: the go.mod files do not resolve the repository's modules on their own.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOWORK=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// changelogProblem returns why CHANGELOG.md does not allow releasing v, or "": it needs a
// section "## [X.Y.Z] - <date>" (Keep a Changelog), whose heading no longer says
// "unreleased".
func changelogProblem(name, v string) string {
	data, err := os.ReadFile(name)
	if err != nil {
		return err.Error()
	}
	re := regexp.MustCompile(`^## \[v?` + regexp.QuoteMeta(strings.TrimPrefix(v, "v")) + `\]`)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if line := sc.Text(); re.MatchString(line) {
			if strings.Contains(strings.ToLower(line), "unreleased") {
				return fmt.Sprintf("CHANGELOG.md: the heading %q still says unreleased: give it the release date", line)
			}
			return ""
		}
	}
	return fmt.Sprintf("CHANGELOG.md has no section for %s (a heading \"## [%s] - YYYY-MM-DD\")", v, strings.TrimPrefix(v, "v"))
}

// modContent is a module's go.mod before and after a release's rewrite.
type modContent struct {
	old, new []byte
	requires []string // the published modules of the repository it requires
}

// requireVersion returns every module's go.mod with each requirement of a published
// module of the repository set to v, keyed by the module's directory.
func requireVersion(ws *workspace, v string) (map[string]modContent, error) {
	out := map[string]modContent{}
	for _, m := range ws.Modules {
		f, data, err := readModFile(m)
		if err != nil {
			return nil, err
		}
		var reqs []string
		edited := false
		for _, r := range slices.Clone(f.Require) {
			if o := ws.byPath(r.Mod.Path); o != nil && o.Published {
				reqs = append(reqs, r.Mod.Path)
				if r.Mod.Version != v {
					if err := f.AddRequire(r.Mod.Path, v); err != nil {
						return nil, fmt.Errorf("%s/go.mod: %w", m.Rel, err)
					}
					edited = true
				}
			}
		}
		c := modContent{old: data, new: data, requires: reqs}
		if edited {
			f.Cleanup()
			if c.new, err = f.Format(); err != nil {
				return nil, fmt.Errorf("%s/go.mod: %w", m.Rel, err)
			}
		}
		out[m.Rel] = c
	}
	return out, nil
}

// tagOrder returns the published modules in an order where each comes after the
// published modules it requires: the root module first, then by directory.
func tagOrder(ws *workspace, mods map[string]modContent) ([]*repoMod, error) {
	pub := ws.published()
	done := map[string]bool{}
	var order []*repoMod
	for len(order) < len(pub) {
		progress := false
		for _, m := range pub {
			if done[m.Path] {
				continue
			}
			ready := true
			for _, r := range mods[m.Rel].requires {
				ready = ready && done[r]
			}
			if ready {
				done[m.Path] = true
				order = append(order, m)
				progress = true
			}
		}
		if !progress {
			return nil, fmt.Errorf("the published modules require each other in a cycle")
		}
	}
	return order, nil
}

// writeProxy writes the published modules at version v, with the go.mod files of mods
// and the go.work work (in the root module's zip, as the release commit has them), to
// dir in the layout of a module proxy (GOPROXY=file://dir).
func writeProxy(ws *workspace, v string, mods map[string]modContent, work []byte, dir string) error {
	files, err := workTreeFiles(ws.Root)
	if err != nil {
		return err
	}
	// A file belongs to the module of the nearest directory above it holding a go.mod
	// (modules outside go.work, such as internal/tools, count: their files are in no
	// published module's zip).
	modDirs := map[string]bool{".": true}
	for _, f := range files {
		if path.Base(f) == "go.mod" {
			modDirs[path.Dir(f)] = true
		}
	}
	owned := map[string][]string{}
	for _, f := range files {
		d := path.Dir(f)
		for !modDirs[d] {
			d = path.Dir(d)
		}
		owned[d] = append(owned[d], f)
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{v, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return err
	}
	for _, m := range ws.published() {
		var zfiles []zipFile
		for _, f := range owned[m.Rel] {
			rel := f
			if m.Rel != "." {
				rel = strings.TrimPrefix(f, m.Rel+"/")
			}
			zf := zipFile{name: rel, file: filepath.Join(ws.Root, filepath.FromSlash(f))}
			switch {
			case rel == "go.mod":
				zf.data = mods[m.Rel].new
			case f == "go.work":
				zf.data = work
			}
			zfiles = append(zfiles, zf)
		}
		esc, err := module.EscapePath(m.Path)
		if err != nil {
			return err
		}
		vdir := filepath.Join(dir, filepath.FromSlash(esc), "@v")
		if err := os.MkdirAll(vdir, 0o755); err != nil {
			return err
		}
		if err := writeZip(filepath.Join(vdir, v+".zip"), module.Version{Path: m.Path, Version: v}, zfiles); err != nil {
			return fmt.Errorf("%s: %w", m.Rel, err)
		}
		if err := os.WriteFile(filepath.Join(vdir, v+".mod"), mods[m.Rel].new, 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(vdir, v+".info"), info, 0o644); err != nil {
			return err
		}
		if err := appendList(filepath.Join(vdir, "list"), v); err != nil {
			return err
		}
	}
	return nil
}

// appendList adds v to a proxy's list of versions, unless it is there.
func appendList(name, v string) error {
	data, err := os.ReadFile(name)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	if slices.Contains(strings.Fields(string(data)), v) {
		return nil
	}
	return os.WriteFile(name, append(data, v+"\n"...), 0o644)
}

// workTreeFiles lists the files of the work tree that git tracks or does not ignore,
// "/"-separated and relative to root; deleted ones are left out.
func workTreeFiles(root string) ([]string, error) {
	out, err := git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	if err != nil {
		return nil, err
	}
	var files []string
	seen := map[string]bool{}
	for _, f := range strings.Split(out, "\x00") {
		if f == "" || seen[f] {
			continue
		}
		seen[f] = true
		fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the work tree, or a symlink (a module zip holds neither)
		}
		files = append(files, f)
	}
	slices.Sort(files)
	return files, nil
}

// git runs git in dir and returns its standard output.
func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
