// Command modules keeps the repository's modules: it tidies them, checks what is
// published, and makes a release. See docs/modules.md.
//
//	modules tidy [-diff]     go mod tidy in every module of go.work; -diff changes
//	                         nothing and fails if a module is not tidy
//	modules check            the published modules carry no replace or exclude directive,
//	                         require no unpublished module of the repository and hold a
//	                         copy of the root LICENSE
//	modules release -version vX.Y.Z [-tag] [-out DIR] [-skip-checks]
//	                         without -tag, a dry run: checks the tree, then writes the
//	                         published modules at the version, as a module proxy would
//	                         serve them, to DIR/proxy; with -tag, checks, commits the
//	                         in-repository requirements at the version and tags every
//	                         published module in dependency order
//	modules list             the published modules' directories, one a line
//
// -root names the repository (default: the git work tree containing the current
// directory).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: modules [-root DIR] tidy [-diff]
       modules [-root DIR] check
       modules [-root DIR] release -version vX.Y.Z [-tag] [-out DIR] [-skip-checks]
       modules [-root DIR] list`

func run(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("modules", flag.ContinueOnError)
	fl.SetOutput(stderr)
	root := fl.String("root", "", "the repository's root directory (default: git rev-parse --show-toplevel)")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if fl.NArg() == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	dir := *root
	if dir == "" {
		out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
		if err != nil {
			fmt.Fprintln(stderr, "modules: no -root and not in a git work tree:", err)
			return 2
		}
		dir = strings.TrimSpace(string(out))
	}
	ws, err := loadWorkspace(dir)
	if err != nil {
		fmt.Fprintln(stderr, "modules:", err)
		return 1
	}
	cmd, rest := fl.Arg(0), fl.Args()[1:]
	sub := flag.NewFlagSet("modules "+cmd, flag.ContinueOnError)
	sub.SetOutput(stderr)
	switch cmd {
	case "tidy":
		diff := sub.Bool("diff", false, "change nothing; fail and print the differences if a module is not tidy")
		if sub.Parse(rest) != nil || sub.NArg() > 0 {
			fmt.Fprintln(stderr, usage)
			return 2
		}
		err = tidy(ws, *diff, stdout, stderr)
	case "check":
		if sub.Parse(rest) != nil || sub.NArg() > 0 {
			fmt.Fprintln(stderr, usage)
			return 2
		}
		err = check(ws, stdout)
	case "release":
		var o releaseOpts
		sub.StringVar(&o.version, "version", "", "the version to release, vX.Y.Z")
		sub.BoolVar(&o.tag, "tag", false, "really release: commit the requirements and create the tags (default: a dry run)")
		sub.StringVar(&o.out, "out", "", "dry run: the directory to write the module proxy to (default: a new temporary directory)")
		sub.BoolVar(&o.skipChecks, "skip-checks", false, "dry run only: skip the refusals (dirty tree, API record, CHANGELOG), for the install test")
		if sub.Parse(rest) != nil || sub.NArg() > 0 || o.version == "" {
			fmt.Fprintln(stderr, usage)
			return 2
		}
		err = release(ws, o, stdout, stderr)
	case "list":
		if sub.Parse(rest) != nil || sub.NArg() > 0 {
			fmt.Fprintln(stderr, usage)
			return 2
		}
		for _, m := range ws.published() {
			fmt.Fprintln(stdout, m.Rel)
		}
	default:
		fmt.Fprintln(stderr, usage)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "modules:", err)
		return 1
	}
	return 0
}
