package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the repository's root, seen from this package's directory.
const repoRoot = "../.."

// docPages lists the markdown pages the checks below cover, as paths relative to the
// repository's root: README.md, CONTRIBUTING.md and every docs/*.md.
func docPages(t *testing.T) []string {
	t.Helper()
	pages := []string{"README.md", "CONTRIBUTING.md"}
	docs, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no docs/*.md found: is the test running from examples/basic?")
	}
	for _, d := range docs {
		pages = append(pages, "docs/"+filepath.Base(d))
	}
	return pages
}

// mdLine is one line of a markdown page outside every fenced code block.
type mdLine struct {
	n    int // 1-based line number
	text string
}

// fence is a fenced code block of a markdown page.
type fence struct {
	line   int      // line number of the opening fence
	info   string   // first word of the info string ("go", "sh", "")
	before string   // the previous non-empty line, trimmed
	body   []string // the lines between the fences, without the fence's indentation
}

var fenceOpen = regexp.MustCompile("^([ \t]*)(```+|~~~+)[ \t]*([^`]*)$")

// parseMarkdown splits a page into its fenced code blocks and the lines outside them.
func parseMarkdown(t *testing.T, name string, src []byte) (prose []mdLine, fences []fence) {
	t.Helper()
	var (
		open     *fence
		marker   string // the opening fence's run of ``` or ~~~
		indent   int
		previous string
	)
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if open != nil {
			if strings.HasPrefix(trimmed, marker[:1]) && strings.Trim(trimmed, marker[:1]) == "" && len(trimmed) >= len(marker) {
				fences = append(fences, *open)
				open = nil
				previous = trimmed
				continue
			}
			body := line
			for i := 0; i < indent && body != "" && (body[0] == ' ' || body[0] == '\t'); i++ {
				body = body[1:]
			}
			open.body = append(open.body, body)
			continue
		}
		if m := fenceOpen.FindStringSubmatch(line); m != nil {
			info, _, _ := strings.Cut(strings.TrimSpace(m[3]), " ")
			open = &fence{line: n, info: info, before: previous}
			marker, indent = m[2], len(m[1])
			continue
		}
		prose = append(prose, mdLine{n, line})
		if trimmed != "" {
			previous = trimmed
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if open != nil {
		t.Errorf("%s:%d: the fenced block opened here is never closed", name, open.line)
	}
	return prose, fences
}

func readPage(t *testing.T, name string) []byte {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return src
}

var goBlockMarker = regexp.MustCompile(`^<!-- (examples/basic/main\.go|excerpt: (\S+)|fragment) -->$`)

const markerHelp = "<!-- examples/basic/main.go -->, <!-- excerpt: PATH --> (PATH from the repository root) or <!-- fragment -->"

// TestDocsGoBlocksAreCheckedOrFragments: every ```go block of the README and the docs
// pages says on the line before it what it is, and what it claims is checked:
//
//   - <!-- examples/basic/main.go -->: the block is that whole file (the program the
//     README shows; TestREADMEShowsThisProgram checks the README's copy too).
//   - <!-- excerpt: PATH -->: the block's lines are a contiguous run of lines of the file
//     PATH (relative to the repository's root), compared after trimming trailing
//     whitespace; the run may be indented in the file as a whole (an excerpt from inside
//     a function), by the same prefix on every non-empty line.
//   - <!-- fragment -->: the block is not compiled (an import line, a snippet with
//     names it does not declare).
//
// So a snippet either cannot drift from code that compiles and runs, or says that it is
// only a fragment.
func TestDocsGoBlocksAreCheckedOrFragments(t *testing.T) {
	blocks := 0
	for _, name := range docPages(t) {
		_, fences := parseMarkdown(t, name, readPage(t, name))
		for _, f := range fences {
			if f.info != "go" && f.info != "golang" {
				continue
			}
			blocks++
			m := goBlockMarker.FindStringSubmatch(f.before)
			switch {
			case m == nil:
				t.Errorf("%s:%d: this ```%s block needs a marker on the line before it, one of %s; the line before it is %q",
					name, f.line, f.info, markerHelp, f.before)
			case m[1] == "examples/basic/main.go":
				src := string(readPage(t, "examples/basic/main.go"))
				if got := strings.Join(f.body, "\n") + "\n"; got != src {
					t.Errorf("%s:%d: the block marked <!-- examples/basic/main.go --> differs from that file; paste the file again", name, f.line)
				}
			case m[2] != "":
				checkExcerpt(t, name, f, m[2])
			}
		}
	}
	if blocks == 0 {
		t.Error("found no ```go block at all: the fence parser is broken")
	}
}

func checkExcerpt(t *testing.T, name string, f fence, file string) {
	t.Helper()
	if !filepath.IsLocal(filepath.FromSlash(file)) {
		t.Errorf("%s:%d: excerpt path %q must be relative to the repository's root and inside it", name, f.line, file)
		return
	}
	src, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(file)))
	if err != nil {
		t.Errorf("%s:%d: the block is marked as an excerpt of %s: %v", name, f.line, file, err)
		return
	}
	if len(f.body) == 0 {
		t.Errorf("%s:%d: the excerpt of %s is empty", name, f.line, file)
		return
	}
	if line := excerptAt(trimRight(strings.Split(string(src), "\n")), trimRight(f.body)); line == 0 {
		t.Errorf("%s:%d: the block marked <!-- excerpt: %s --> is not a contiguous run of that file's lines; copy it from the file again (or mark it <!-- fragment -->)",
			name, f.line, file)
	}
}

func trimRight(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.TrimRightFunc(l, unicode.IsSpace)
	}
	return out
}

// excerptAt returns the 1-based line of file where excerpt starts, or 0. Every
// non-empty line of the run in file is the excerpt's line behind one common prefix of
// whitespace; empty lines stay empty.
func excerptAt(file, excerpt []string) int {
	for i := 0; i+len(excerpt) <= len(file); i++ {
		if !strings.HasSuffix(file[i], excerpt[0]) {
			continue
		}
		prefix := strings.TrimSuffix(file[i], excerpt[0])
		if strings.TrimSpace(prefix) != "" || excerpt[0] == "" {
			continue
		}
		ok := true
		for j, want := range excerpt {
			got := file[i+j]
			if want == "" && got != "" || want != "" && got != prefix+want {
				ok = false
				break
			}
		}
		if ok {
			return i + 1
		}
	}
	return 0
}

var (
	inlineLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	refLink    = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*(\S+)`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	heading    = regexp.MustCompile(`^\s{0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
)

// TestDocsLinksResolve: every relative link of the README and the docs pages names a
// file or directory of the repository, and every #anchor names a heading of its page
// (GitHub's anchors: the heading in lower case, spaces made hyphens, punctuation
// dropped). Links with a scheme (https:, mailto:) are not followed.
func TestDocsLinksResolve(t *testing.T) {
	anchors := map[string]map[string]bool{} // page (from the root) → its anchors
	anchorsOf := func(page string) map[string]bool {
		if a, ok := anchors[page]; ok {
			return a
		}
		a := map[string]bool{}
		prose, _ := parseMarkdown(t, page, readPage(t, page))
		seen := map[string]int{}
		for _, l := range prose {
			for _, m := range htmlAnchor.FindAllStringSubmatch(l.text, -1) {
				a[m[1]] = true
			}
			m := heading.FindStringSubmatch(l.text)
			if m == nil {
				continue
			}
			slug := slugify(m[1])
			if k := seen[slug]; k > 0 {
				a[fmt.Sprintf("%s-%d", slug, k)] = true
			} else {
				a[slug] = true
			}
			seen[slug]++
		}
		anchors[page] = a
		return a
	}

	links := 0
	for _, name := range docPages(t) {
		prose, _ := parseMarkdown(t, name, readPage(t, name))
		for _, l := range prose {
			text := codeSpan.ReplaceAllStringFunc(l.text, func(span string) string {
				return strings.Repeat(" ", len(span))
			})
			var targets []string
			for _, m := range inlineLink.FindAllStringSubmatch(text, -1) {
				targets = append(targets, m[1])
			}
			if m := refLink.FindStringSubmatch(text); m != nil {
				targets = append(targets, m[1])
			}
			for _, target := range targets {
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				file, anchor, _ := strings.Cut(target, "#")
				page := name
				if file != "" {
					page = path.Join(path.Dir(name), file)
					if strings.HasPrefix(page, "../") || path.IsAbs(file) {
						t.Errorf("%s:%d: link %q leaves the repository", name, l.n, target)
						continue
					}
					if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(page))); err != nil {
						t.Errorf("%s:%d: link %q: no such file or directory %s (relative links start from the page's own directory)", name, l.n, target, page)
						continue
					}
				}
				if anchor != "" && strings.HasSuffix(page, ".md") && !anchorsOf(page)[anchor] {
					t.Errorf("%s:%d: link %q: %s has no heading with the anchor #%s", name, l.n, target, page, anchor)
				}
			}
		}
	}
	if links == 0 {
		t.Error("found no relative link at all: the link parser is broken")
	}
}

// slugify is GitHub's anchor for a heading: lower case, spaces made hyphens, every
// character but letters, digits, '-' and '_' dropped.
func slugify(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
