// Command apirecord keeps the record of the repository's public API in api/: one text
// file per public package, one line per exported feature, in the style of Go's own
// api/go1.*.txt files. See docs/API.md.
//
//	apirecord -w          rewrite api/ from the current tree
//	apirecord -check      fail if api/ differs from the current tree
//	apirecord -history    fail if a commit removed or changed a line of api/ without a
//	                      line "API-Change: <reason>" in its message
//
// -check and -history may be given together. -root names the repository (default: the
// git work tree containing the current directory).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("apirecord", flag.ContinueOnError)
	fl.SetOutput(stderr)
	write := fl.Bool("w", false, "rewrite the record in api/")
	check := fl.Bool("check", false, "fail if the record in api/ differs from the current tree")
	history := fl.Bool("history", false, "fail if a commit removed or changed a record line without an API-Change: line in its message")
	rev := fl.String("rev", "HEAD", "with -history: the commit whose history is checked")
	root := fl.String("root", "", "the repository's root directory (default: git rev-parse --show-toplevel)")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if fl.NArg() > 0 || (!*write && !*check && !*history) || (*write && *check) {
		fmt.Fprintln(stderr, "usage: apirecord -w | [-check] [-history [-rev REV]] [-root DIR]")
		return 2
	}
	dir := *root
	if dir == "" {
		out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
		if err != nil {
			fmt.Fprintln(stderr, "apirecord: no -root and not in a git work tree:", err)
			return 2
		}
		dir = strings.TrimSpace(string(out))
	}
	apiDir := filepath.Join(dir, "api")
	status := 0
	if *write || *check {
		files, err := generate(dir)
		if err != nil {
			fmt.Fprintln(stderr, "apirecord:", err)
			return 1
		}
		if *write {
			if err := writeRecord(apiDir, files); err != nil {
				fmt.Fprintln(stderr, "apirecord:", err)
				return 1
			}
			fmt.Fprintf(stdout, "apirecord: wrote %d files in %s\n", len(files), apiDir)
		} else {
			diff, err := compareRecord(apiDir, files)
			if err != nil {
				fmt.Fprintln(stderr, "apirecord:", err)
				return 1
			}
			if diff != "" {
				fmt.Fprint(stderr, diff)
				fmt.Fprint(stderr, `
apirecord: the API record in api/ is out of date. Run "make api" and commit api/ with
the change. If a line above starts with "-" (a removed or changed feature: an
incompatible change), the commit message needs a line
	API-Change: <why the change is worth breaking users>
(docs/API.md).
`)
				status = 1
			} else {
				fmt.Fprintf(stdout, "apirecord: api/ matches the tree (%d packages)\n", len(files))
			}
		}
	}
	if *history {
		if out, err := git(dir, "rev-parse", "--is-shallow-repository"); err == nil && strings.TrimSpace(string(out)) == "true" {
			fmt.Fprintln(stderr, "apirecord: warning: shallow clone, commits before its boundary are not checked (git fetch --unshallow)")
		}
		bad, n, err := checkHistory(dir, *rev)
		if err != nil {
			fmt.Fprintln(stderr, "apirecord:", err)
			return 1
		}
		if len(bad) > 0 {
			fmt.Fprintf(stderr, "apirecord: %d commit(s) remove or change lines of api/ without an %q line in the message:\n", len(bad), trailer)
			for _, c := range bad {
				fmt.Fprintf(stderr, "  %s %s\n", c.Hash[:12], c.Subject)
				for i, l := range c.Removed {
					if i == 5 {
						fmt.Fprintf(stderr, "      ... and %d more\n", len(c.Removed)-5)
						break
					}
					fmt.Fprintf(stderr, "      %s\n", l)
				}
			}
			fmt.Fprintf(stderr, "Reword each of them (git rebase -i, \"reword\") with a line %q, or, for a commit\n"+
				"already on main, add a line \"<hash> <reason>\" to %s (docs/API.md).\n", trailer+" <reason>", acceptedFile)
			status = 1
		} else {
			fmt.Fprintf(stdout, "apirecord: history of api/ ok (%d commit(s) touch it)\n", n)
		}
	}
	return status
}

// readRecord reads the *.txt files of dir; a missing dir is an empty record.
func readRecord(dir string) (map[string]string, error) {
	files := map[string]string{}
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return files, nil
	}
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".txt") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		files[e.Name()] = string(b)
	}
	return files, nil
}

// writeRecord makes the *.txt files of dir exactly files.
func writeRecord(dir string, files map[string]string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, err := readRecord(dir)
	if err != nil {
		return err
	}
	for name := range old {
		if _, keep := files[name]; !keep {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return err
			}
		}
	}
	for name, content := range files {
		if c, ok := old[name]; ok && c == content {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// compareRecord returns a listing of the differences between the record in dir and
// files, "" if there are none.
func compareRecord(dir string, files map[string]string) (string, error) {
	old, err := readRecord(dir)
	if err != nil {
		return "", err
	}
	names := map[string]bool{}
	for n := range old {
		names[n] = true
	}
	for n := range files {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	var b bytes.Buffer
	for _, n := range sorted {
		was, inOld := old[n]
		is, inNew := files[n]
		if inOld && inNew && was == is {
			continue
		}
		switch {
		case !inOld:
			fmt.Fprintf(&b, "api/%s: missing (a new package)\n", n)
		case !inNew:
			fmt.Fprintf(&b, "api/%s: no such package any more\n", n)
		default:
			fmt.Fprintf(&b, "api/%s: differs\n", n)
		}
		wasSet, isSet := lineSet(was), lineSet(is)
		var diff []string
		for l := range wasSet {
			if !isSet[l] {
				diff = append(diff, "-"+l)
			}
		}
		for l := range isSet {
			if !wasSet[l] {
				diff = append(diff, "+"+l)
			}
		}
		// Sort by line, "-" before "+" for the same line.
		sort.Slice(diff, func(i, j int) bool {
			if diff[i][1:] != diff[j][1:] {
				return diff[i][1:] < diff[j][1:]
			}
			return diff[i][0] == '-'
		})
		if len(diff) == 0 {
			fmt.Fprintln(&b, "  (only order, blank lines or the final newline differ)")
		}
		for _, l := range diff {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	return b.String(), nil
}

func lineSet(s string) map[string]bool {
	set := map[string]bool{}
	for _, l := range strings.Split(s, "\n") {
		if l != "" {
			set[l] = true
		}
	}
	return set
}
