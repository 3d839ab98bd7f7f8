package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
)

// workReplaces returns go.work with one replace directive per version at which a module
// of the workspace requires another (given the workspace's go.mod files, keyed by module
// directory), to that module's directory, and no other replace of this repository's
// modules.
//
// The use directives make the modules main modules, but do not replace the versions
// they require each other at: the go command still reads those versions' go.mod files to
// build the module graph, and fails on one that no proxy has (the zero version before the
// first release, every version of an unpublished module, a release not pushed yet).
// These replaces let it read the work tree's instead, offline. No go.mod carries a
// replace: a published module must not (go install pkg@version refuses it), and go.work
// is not part of what users get.
func workReplaces(ws *workspace, gomods map[string][]byte) ([]byte, error) {
	name := filepath.Join(ws.Root, "go.work")
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	wf, err := modfile.ParseWork(name, data, nil)
	if err != nil {
		return nil, err
	}
	want := map[module.Version]bool{}
	for _, m := range ws.Modules {
		f, err := modfile.Parse(m.Rel+"/go.mod", gomods[m.Rel], nil)
		if err != nil {
			return nil, err
		}
		for _, r := range f.Require {
			if ws.byPath(r.Mod.Path) != nil {
				want[r.Mod] = true
			}
		}
	}
	have := map[module.Version]string{}
	for _, r := range wf.Replace {
		have[r.Old] = r.New.Path
	}
	keys := make([]module.Version, 0, len(want))
	for v := range want {
		keys = append(keys, v)
	}
	slices.SortFunc(keys, func(a, b module.Version) int {
		return strings.Compare(a.Path+" "+a.Version, b.Path+" "+b.Version)
	})
	for _, v := range keys {
		dir := "./" + ws.byPath(v.Path).Rel
		if dir == "./." {
			dir = "./"
		}
		if have[v] == dir {
			continue
		}
		if err := wf.AddReplace(v.Path, v.Version, dir, ""); err != nil {
			return nil, err
		}
	}
	// Dropped after the additions, which then join the replace block (AddReplace
	// puts a line beside the last one).
	for _, r := range slices.Clone(wf.Replace) {
		if ws.ours(r.Old.Path) && !want[r.Old] {
			if err := wf.DropReplace(r.Old.Path, r.Old.Version); err != nil {
				return nil, err
			}
		}
	}
	wf.Cleanup()
	wf.SortBlocks()
	return modfile.Format(wf.Syntax), nil
}

// syncWork writes go.work's replaces for the workspace's go.mod files (see
// workReplaces); with diff it writes nothing and reports whether go.work would change.
func syncWork(ws *workspace, diff bool, stdout io.Writer) (bool, error) {
	gomods := map[string][]byte{}
	for _, m := range ws.Modules {
		data, err := os.ReadFile(filepath.Join(m.Dir, "go.mod"))
		if err != nil {
			return false, err
		}
		gomods[m.Rel] = data
	}
	name := filepath.Join(ws.Root, "go.work")
	old, err := os.ReadFile(name)
	if err != nil {
		return false, err
	}
	work, err := workReplaces(ws, gomods)
	if err != nil {
		return false, err
	}
	if bytes.Equal(old, work) {
		return false, nil
	}
	if diff {
		fmt.Fprintf(stdout, "go.work does not replace exactly the versions the modules require each other at:\n%s", lineDiff(old, work))
		return true, nil
	}
	if err := os.WriteFile(name, work, 0o644); err != nil {
		return false, err
	}
	fmt.Fprintln(stdout, "tidied go.work")
	return true, nil
}
