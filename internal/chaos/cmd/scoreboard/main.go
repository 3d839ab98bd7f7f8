// Command scoreboard writes docs/RELIABILITY.md from the JSON-lines results of the
// fault tests (internal/chaos, with OUTBOX_CHAOS_RESULTS set):
//
//	go run ./internal/chaos/cmd/scoreboard -o docs/RELIABILITY.md -commit $(git describe --always --dirty) /tmp/chaos-results.jsonl /tmp/chaos-results-b.jsonl
//
// Missing files are skipped. See internal/chaos's scoreboard.go for the line format.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/outboxkit/outbox/internal/chaos"
)

func main() {
	out := flag.String("o", "docs/RELIABILITY.md", "the file to write (- for stdout)")
	commit := flag.String("commit", "", "the commit the fault tests ran, named in the file (make chaos passes git describe --always --dirty)")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: scoreboard [-o file] [-commit rev] results.jsonl...")
		os.Exit(2)
	}
	results, err := chaos.ReadResults(flag.Args()...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scoreboard:", err)
		os.Exit(1)
	}
	if len(results) == 0 {
		fmt.Fprintln(os.Stderr, "scoreboard: no results in", flag.Args())
		os.Exit(1)
	}
	var b bytes.Buffer
	if err := chaos.WriteMarkdown(&b, results, time.Now(), *commit); err != nil {
		fmt.Fprintln(os.Stderr, "scoreboard:", err)
		os.Exit(1)
	}
	if *out == "-" {
		_, err = os.Stdout.Write(b.Bytes())
	} else {
		err = os.WriteFile(*out, b.Bytes(), 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scoreboard:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "scoreboard: %d results → %s\n", len(results), *out)
}
