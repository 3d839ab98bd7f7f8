package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// tidy runs go mod tidy in every module of the workspace, then gives go.work the
// replaces the modules' requirements of each other need (see workReplaces). With diff
// it changes nothing and fails when a module or go.work is not tidy, printing the
// differences.
//
// go mod tidy works on one module and ignores go.work, and the go.mod files name the
// repository's other modules at their last release (the zero version before the first
// one) with no replace directive: a published module must carry none, since go install
// pkg@version refuses a module that has one. On its own, tidy would fetch those
// versions, which may not exist yet. So each module is tidied through a copy of its
// go.mod (go mod tidy -modfile) that replaces every other module of the workspace by its
// directory, as go.work does; the replaces are dropped from the result before it is
// compared or written back.
func tidy(ws *workspace, diff bool, stdout, stderr io.Writer) error {
	var untidy []string
	for _, m := range ws.Modules {
		changed, err := tidyModule(ws, m, diff, stdout)
		if err != nil {
			return fmt.Errorf("%s: %w", m.Rel, err)
		}
		if changed && diff {
			untidy = append(untidy, m.Rel)
		}
	}
	changed, err := syncWork(ws, diff, stdout)
	if err != nil {
		return err
	}
	if changed && diff {
		untidy = append(untidy, "go.work")
	}
	if len(untidy) > 0 {
		return fmt.Errorf("not tidy: %s (run make tidy)", strings.Join(untidy, ", "))
	}
	return nil
}

// tidyModule tidies m and reports whether its go.mod or go.sum changed (with diff, would
// change: it then prints the differences and writes nothing).
func tidyModule(ws *workspace, m *repoMod, diff bool, stdout io.Writer) (bool, error) {
	f, gomod, err := readModFile(m)
	if err != nil {
		return false, err
	}
	gosum, err := os.ReadFile(filepath.Join(m.Dir, "go.sum"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	tmp, err := os.MkdirTemp("", "outbox-tidy-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(tmp)
	modFile, sumFile := filepath.Join(tmp, "go.tidy.mod"), filepath.Join(tmp, "go.tidy.sum")
	if err := os.WriteFile(modFile, gomod, 0o644); err != nil {
		return false, err
	}
	if err := os.WriteFile(sumFile, gosum, 0o644); err != nil {
		return false, err
	}
	replaced := map[string]bool{}
	for _, r := range f.Replace {
		replaced[r.Old.Path] = true
	}
	var add, drop []string
	for _, o := range ws.Modules {
		if o != m && !replaced[o.Path] {
			add = append(add, "-replace="+o.Path+"="+o.Dir)
			drop = append(drop, "-dropreplace="+o.Path)
		}
	}
	steps := [][]string{
		append([]string{"mod", "edit"}, append(add, modFile)...),
		{"mod", "tidy", "-modfile=" + modFile},
		append([]string{"mod", "edit"}, append(drop, modFile)...),
	}
	for _, args := range steps {
		cmd := exec.Command("go", args...)
		cmd.Dir = m.Dir
		cmd.Env = append(os.Environ(), "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			return false, fmt.Errorf("go %s: %v\n%s", strings.Join(args[:2], " "), err, out)
		}
	}
	newMod, err := os.ReadFile(modFile)
	if err != nil {
		return false, err
	}
	newSum, err := os.ReadFile(sumFile)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	modChanged, sumChanged := !bytes.Equal(gomod, newMod), !bytes.Equal(gosum, newSum)
	if diff {
		for _, d := range []struct {
			changed  bool
			name     string
			old, new []byte
		}{{modChanged, "go.mod", gomod, newMod}, {sumChanged, "go.sum", gosum, newSum}} {
			if d.changed {
				fmt.Fprintf(stdout, "%s/%s is not tidy:\n%s", m.Rel, d.name, lineDiff(d.old, d.new))
			}
		}
		return modChanged || sumChanged, nil
	}
	if modChanged {
		if err := os.WriteFile(filepath.Join(m.Dir, "go.mod"), newMod, 0o644); err != nil {
			return false, err
		}
	}
	if sumChanged {
		name := filepath.Join(m.Dir, "go.sum")
		if len(newSum) == 0 {
			err = os.Remove(name)
			if errors.Is(err, fs.ErrNotExist) {
				err = nil
			}
		} else {
			err = os.WriteFile(name, newSum, 0o644)
		}
		if err != nil {
			return false, err
		}
	}
	if modChanged || sumChanged {
		fmt.Fprintf(stdout, "tidied %s\n", m.Rel)
	}
	return modChanged || sumChanged, nil
}

// lineDiff lists the lines only in old ("-") and only in new ("+"), in their order: the
// lines of go.mod and go.sum are unique, so this is enough to see what tidy changes.
func lineDiff(old, new []byte) string {
	count := func(b []byte) map[string]int {
		n := map[string]int{}
		for _, l := range strings.Split(string(b), "\n") {
			n[l]++
		}
		return n
	}
	inOld, inNew := count(old), count(new)
	var sb strings.Builder
	for _, l := range strings.Split(string(old), "\n") {
		if inNew[l] == 0 {
			fmt.Fprintf(&sb, "\t-%s\n", l)
		}
	}
	for _, l := range strings.Split(string(new), "\n") {
		if inOld[l] == 0 {
			fmt.Fprintf(&sb, "\t+%s\n", l)
		}
	}
	if sb.Len() == 0 {
		sb.WriteString("\t(the same lines, in another order or layout)\n")
	}
	return sb.String()
}
