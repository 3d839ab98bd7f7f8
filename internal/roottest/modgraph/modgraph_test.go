// Package modgraph checks the module layout from a user's side: a program that imports
// only the core gets a tiny module graph, and one that uses the gin, gorm, fx and
// Prometheus integrations does not get the other integrations' frameworks.
package modgraph

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot is the checkout this test runs in (the directory holding go.work).
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.work above the working directory")
		}
		dir = parent
	}
}

// ourModules lists the module directories of the workspace, relative to root.
func ourModules(t *testing.T, root string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	var rel []string
	for _, dir := range strings.Fields(string(out)) {
		r, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		rel = append(rel, filepath.ToSlash(r))
	}
	return rel
}

// consumerModules builds a throwaway consumer module importing pkgs, tidies it against
// this checkout (a replace per module of ours) and returns `go list -m all`.
func consumerModules(t *testing.T, pkgs ...string) []string {
	t.Helper()
	root := repoRoot(t)
	dir := t.TempDir()
	var gomod strings.Builder
	gomod.WriteString("module example.com/consumer\n\ngo 1.25.0\n\n")
	for _, m := range ourModules(t, root) {
		path := "github.com/outboxkit/outbox"
		if m != "." {
			path += "/" + m
		}
		gomod.WriteString("replace " + path + " => " + filepath.Join(root, m) + "\n")
	}
	var src strings.Builder
	src.WriteString("package main\n\nimport (\n")
	for _, p := range pkgs {
		src.WriteString("\t_ \"" + p + "\"\n")
	}
	src.WriteString(")\n\nfunc main() {}\n")
	must(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod.String()), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(src.String()), 0o644))
	run := func(args ...string) string {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("mod", "tidy")
	return strings.Split(strings.TrimSpace(run("list", "-m", "all")), "\n")
}

func TestCoreOnlyConsumerHasATinyModuleGraph(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a consumer module")
	}
	t.Parallel()
	mods := consumerModules(t, "github.com/outboxkit/outbox/core")
	t.Logf("go list -m all (%d):\n%s", len(mods), strings.Join(mods, "\n"))
	if len(mods) > 10 {
		t.Fatalf("a program importing only the core sees %d modules, more than 10", len(mods))
	}
}

func TestGinGormFxPrometheusConsumerGetsNoOtherFramework(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a consumer module")
	}
	t.Parallel()
	mods := consumerModules(t,
		"github.com/outboxkit/outbox/core",
		"github.com/outboxkit/outbox/middleware/gin",
		"github.com/outboxkit/outbox/adapters/gorm",
		"github.com/outboxkit/outbox/fxmodule",
		"github.com/outboxkit/outbox/adapters/prometheus")
	t.Logf("go list -m all: %d modules", len(mods))
	for _, m := range mods {
		path, _, _ := strings.Cut(m, " ")
		for _, banned := range []string{"github.com/labstack/echo", "github.com/uptrace/bun", "github.com/jmoiron/sqlx", "github.com/chromedp/",
			"github.com/twmb/franz-go", "github.com/nats-io/", "go.opentelemetry.io/otel"} {
			if strings.HasPrefix(path, banned) {
				t.Errorf("the gin+gorm+fx+Prometheus consumer gets %s", m)
			}
		}
	}
}

// TestRelayConsumersGetOnlyTheirBroker: a program that relays to one broker gets that
// broker's client and no other broker's, nor OpenTelemetry.
func TestRelayConsumersGetOnlyTheirBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a consumer module")
	}
	t.Parallel()
	for _, tc := range []struct {
		pkg    string
		banned []string
	}{
		{"github.com/outboxkit/outbox/adapters/kafka", []string{"github.com/nats-io/", "go.opentelemetry.io/otel"}},
		{"github.com/outboxkit/outbox/adapters/nats", []string{"github.com/twmb/franz-go", "go.opentelemetry.io/otel"}},
		{"github.com/outboxkit/outbox/adapters/otel", []string{"github.com/twmb/franz-go", "github.com/nats-io/"}},
	} {
		t.Run(tc.pkg[strings.LastIndex(tc.pkg, "/")+1:], func(t *testing.T) {
			t.Parallel()
			mods := consumerModules(t, "github.com/outboxkit/outbox/core", tc.pkg)
			t.Logf("go list -m all: %d modules", len(mods))
			for _, m := range mods {
				path, _, _ := strings.Cut(m, " ")
				for _, banned := range tc.banned {
					if strings.HasPrefix(path, banned) {
						t.Errorf("a consumer of %s gets %s", tc.pkg, m)
					}
				}
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
