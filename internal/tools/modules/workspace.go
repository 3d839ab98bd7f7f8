package main

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
)

// workspace is the repository: its root and the modules go.work lists.
type workspace struct {
	Root    string     // absolute directory holding go.work
	Path    string     // the root module's path
	Modules []*repoMod // in go.work's order, the root module first
}

// repoMod is one module of the workspace.
type repoMod struct {
	Path      string // module path
	Rel       string // directory relative to the root, "/"-separated; "." for the root module
	Dir       string // absolute directory
	Published bool   // tagged at each release and fetched by users
}

// Tag returns the module's tag for version: "v1.2.3" for the root module,
// "adapters/gorm/v1.2.3" for the others.
func (m *repoMod) Tag(version string) string {
	if m.Rel == "." {
		return version
	}
	return m.Rel + "/" + version
}

// isPublished reports whether the module in directory rel (relative to the root,
// "/"-separated) is published: every module of go.work but the test-support and
// test-only modules under internal/, the examples and the benchmark program.
func isPublished(rel string) bool {
	return rel != "internal" && !strings.HasPrefix(rel, "internal/") && rel != "examples" && rel != "cmd/outbox-bench"
}

// loadWorkspace reads go.work in root and the go.mod of every module it lists.
func loadWorkspace(root string) (*workspace, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		return nil, err
	}
	wf, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		return nil, err
	}
	ws := &workspace{Root: root}
	for _, u := range wf.Use {
		rel := path.Clean(filepath.ToSlash(u.Path))
		if path.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
			return nil, fmt.Errorf("go.work: %s is outside the repository", u.Path)
		}
		dir := filepath.Join(root, filepath.FromSlash(rel))
		gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err != nil {
			return nil, err
		}
		m := &repoMod{Path: modfile.ModulePath(gomod), Rel: rel, Dir: dir, Published: isPublished(rel)}
		if m.Path == "" {
			return nil, fmt.Errorf("%s/go.mod: no module path", rel)
		}
		if rel == "." {
			ws.Path = m.Path
			ws.Modules = append([]*repoMod{m}, ws.Modules...)
		} else {
			ws.Modules = append(ws.Modules, m)
		}
	}
	if ws.Path == "" {
		return nil, fmt.Errorf("go.work does not list the root module (.)")
	}
	for _, m := range ws.Modules[1:] {
		if want := ws.Path + "/" + m.Rel; m.Path != want {
			return nil, fmt.Errorf("%s/go.mod: module %s, want %s", m.Rel, m.Path, want)
		}
	}
	return ws, nil
}

// published returns the published modules, the root module first.
func (ws *workspace) published() []*repoMod {
	var out []*repoMod
	for _, m := range ws.Modules {
		if m.Published {
			out = append(out, m)
		}
	}
	return out
}

// byPath returns the workspace's module with the module path p, or nil.
func (ws *workspace) byPath(p string) *repoMod {
	for _, m := range ws.Modules {
		if m.Path == p {
			return m
		}
	}
	return nil
}

// ours reports whether the module path p belongs to this repository.
func (ws *workspace) ours(p string) bool {
	return p == ws.Path || strings.HasPrefix(p, ws.Path+"/")
}

// readModFile parses m's go.mod.
func readModFile(m *repoMod) (*modfile.File, []byte, error) {
	name := filepath.Join(m.Dir, "go.mod")
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, nil, err
	}
	f, err := modfile.Parse(name, data, nil)
	if err != nil {
		return nil, nil, err
	}
	return f, data, nil
}
