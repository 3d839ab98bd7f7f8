package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// check reports what would keep a user from getting the published modules with go get
// or go install pkg@version:
//   - a replace or exclude directive in a published module's go.mod (ignored for its
//     users, refused by go install pkg@version; go.work resolves the repository's
//     modules during development);
//   - a requirement of a module of this repository that is not published (a user's
//     go mod tidy loads it and cannot fetch it);
//   - a published module without a copy of the root LICENSE (a nested module's zip holds
//     only its own directory, and pkg.go.dev shows no documentation without a license).
//
// It also fails when any module's go.mod replaces a module of this repository: go.work
// is the one place that resolves them.
func check(ws *workspace, stdout io.Writer) error {
	license, err := os.ReadFile(filepath.Join(ws.Root, "LICENSE"))
	if err != nil {
		return err
	}
	var problems []string
	for _, m := range ws.Modules {
		f, _, err := readModFile(m)
		if err != nil {
			return err
		}
		for _, r := range f.Replace {
			if ws.ours(r.Old.Path) {
				problems = append(problems, fmt.Sprintf("%s/go.mod replaces %s: go.work resolves the repository's modules", m.Rel, r.Old.Path))
			}
		}
		if !m.Published {
			continue
		}
		if len(f.Replace) > 0 {
			problems = append(problems, fmt.Sprintf("%s/go.mod has replace directives: go install pkg@version refuses the module, and its users ignore them", m.Rel))
		}
		if len(f.Exclude) > 0 {
			problems = append(problems, fmt.Sprintf("%s/go.mod has exclude directives: go install pkg@version refuses the module, and its users ignore them", m.Rel))
		}
		for _, r := range f.Require {
			if !ws.ours(r.Mod.Path) {
				continue
			}
			if o := ws.byPath(r.Mod.Path); o == nil || !o.Published {
				problems = append(problems, fmt.Sprintf("%s/go.mod requires %s, which is not published: its users could not fetch it", m.Rel, r.Mod.Path))
			}
		}
		if m.Rel != "." {
			l, err := os.ReadFile(filepath.Join(m.Dir, "LICENSE"))
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			if !bytes.Equal(l, license) {
				problems = append(problems, fmt.Sprintf("%s/LICENSE is missing or differs from ./LICENSE: the module's zip holds only its directory", m.Rel))
			}
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("the published modules:\n\t%s", strings.Join(problems, "\n\t"))
	}
	fmt.Fprintf(stdout, "modules: %d published modules, none requires an unpublished one or carries a replace\n", len(ws.published()))
	return nil
}
