package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// trailer starts the line of a commit message that gives the reason for an
// incompatible change of the record.
const trailer = "API-Change:"

// recordSpec is the git pathspec of the record's files.
const recordSpec = ":(glob)api/*.txt"

// acceptedFile lists commits already in the shared history (which cannot be reworded)
// that removed or changed record lines without a trailer line: one "<commit hash>
// <reason>" a line, "#" comments allowed. Listed commits pass as if they had the line.
const acceptedFile = "api/accepted-changes"

// offense is a commit that removes or changes record lines without a trailer line.
type offense struct {
	Hash, Subject string
	Removed       []string // "api/<file>: <line>", or "api/<file>: (deleted)"
}

// checkHistory walks every commit reachable from rev that touches the record (api/*.txt)
// and returns those whose diff removes or changes a line (a "-" line; additions are
// compatible) without a message line starting with "API-Change:" followed by a reason.
// Commits before the record existed touch none of its files and are not looked at. A
// merge commit counts only for lines its result changes against all its parents (git's
// dense combined diff): the branch commits it merges are checked one by one. It also
// returns how many commits touch the record.
func checkHistory(dir, rev string) ([]offense, int, error) {
	out, err := git(dir, "rev-list", "--full-history", "--reverse", rev, "--", recordSpec)
	if err != nil {
		return nil, 0, err
	}
	commits := strings.Fields(string(out))
	accepted, err := readAccepted(filepath.Join(dir, filepath.FromSlash(acceptedFile)))
	if err != nil {
		return nil, 0, err
	}
	var bad []offense
	for _, c := range commits {
		if accepted(c) {
			continue
		}
		removed, err := removedLines(dir, c)
		if err != nil {
			return nil, 0, err
		}
		if len(removed) == 0 {
			continue
		}
		raw, err := git(dir, "cat-file", "commit", c)
		if err != nil {
			return nil, 0, err
		}
		msg := ""
		if i := bytes.Index(raw, []byte("\n\n")); i >= 0 {
			msg = string(raw[i+2:])
		}
		if hasTrailer(msg) {
			continue
		}
		subject, _, _ := strings.Cut(strings.TrimLeft(msg, "\n"), "\n")
		bad = append(bad, offense{Hash: c, Subject: subject, Removed: removed})
	}
	return bad, len(commits), nil
}

// readAccepted reads the accepted-changes file (none is fine) and returns a test for
// whether a commit's full hash is listed in it (as a prefix of 7 or more digits).
func readAccepted(path string) (func(string) bool, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return func(string) bool { return false }, nil
	}
	if err != nil {
		return nil, err
	}
	var prefixes []string
	for i, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		hash, reason, _ := strings.Cut(l, " ")
		if len(hash) < 7 || strings.Trim(hash, "0123456789abcdef") != "" || strings.TrimSpace(reason) == "" {
			return nil, fmt.Errorf("%s:%d: want \"<commit hash, 7 or more digits> <reason>\", have %q", acceptedFile, i+1, l)
		}
		prefixes = append(prefixes, hash)
	}
	return func(c string) bool {
		for _, p := range prefixes {
			if strings.HasPrefix(c, p) {
				return true
			}
		}
		return false
	}, nil
}

// hasTrailer reports whether msg has a line "API-Change: <reason>" with a non-empty
// reason.
func hasTrailer(msg string) bool {
	for _, l := range strings.Split(msg, "\n") {
		l = strings.TrimRight(l, "\r")
		if rest, ok := strings.CutPrefix(l, trailer); ok && strings.TrimSpace(rest) != "" {
			return true
		}
	}
	return false
}

// removedLines returns the record lines commit c removes or changes, against its parent
// (all additions for a root commit) or, for a merge, against all its parents.
func removedLines(dir, c string) ([]string, error) {
	out, err := git(dir, "diff-tree", "-r", "-p", "--cc", "--root", "--no-commit-id",
		"--no-renames", "--no-ext-diff", "--no-textconv", "--no-color", "-U0", c, "--", recordSpec)
	if err != nil {
		return nil, err
	}
	var removed []string
	file := ""
	cols := 0 // the number of parent columns in the current hunk; 0 outside hunks
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1024*1024), 64*1024*1024)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "diff "):
			cols = 0
			// "diff --git a/api/x.txt b/api/x.txt" or "diff --cc api/x.txt"
			f := strings.Fields(l)
			file = strings.TrimPrefix(f[len(f)-1], "b/")
		case cols == 0 && strings.HasPrefix(l, "deleted file mode"):
			// Listed on its own too, for an empty file has no "-" lines.
			removed = append(removed, file+": (deleted)")
		case strings.HasPrefix(l, "@@"):
			cols = len(l) - len(strings.TrimLeft(l, "@")) - 1
		case cols > 0 && len(l) >= cols && !strings.HasPrefix(l, `\`):
			if strings.Contains(l[:cols], "-") {
				removed = append(removed, file+": "+l[cols:])
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return removed, nil
}

func git(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", append([]string{"-c", "core.quotePath=false"}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
