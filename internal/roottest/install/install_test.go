// Package install installs the library the way a user does: from a module proxy, into
// fresh modules with no replace directive and no checkout in sight, at a version that
// the release script's dry run makes (docs/modules.md, "Releasing"). It also checks what
// each module brings into its users' module graphs.
package install

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

// rootPath is the root module's path; every published module's path starts with it.
const rootPath = "github.com/outboxkit/outbox"

// versionPrefix starts every version this test releases; a timestamp (Unix nanoseconds)
// makes each run's version its own, so that runs never share a module cache entry.
const versionPrefix = "v0.0.0-installtest."

// TestInstallFromModuleProxy releases the work tree at a test version into a module
// proxy on disk (the release script's dry run: the go.mod files and zips that tagging
// would publish), then, as a user would with GOPROXY pointing at it:
//   - go gets each published library module into a fresh module of its own, tidies it
//     and lists its module graph, which must hold no unpublished module of this
//     repository, only ours at the test version, and no framework the module does not
//     use;
//   - builds a program with the core, gin, gorm, fx and Prometheus;
//   - go installs the command-line tool at the version and runs it.
//
// Run it with -v to see each consumer's module count (docs/modules.md records them).
func TestInstallFromModuleProxy(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		msg := fmt.Sprintf("install test skipped: no go command in PATH (%v)", err)
		fmt.Fprintln(os.Stderr, msg)
		t.Skip(msg)
	}
	t.Parallel()
	root := repoRoot(t)
	version := versionPrefix + strconv.FormatInt(time.Now().UnixNano(), 10)
	out := t.TempDir()

	// The dry run of make release, at the test version: -skip-checks lets it run on a
	// work tree with changes and without a CHANGELOG section for the version.
	release := exec.Command("go", "run", "./modules", "-root", "../..", "release",
		"-version", version, "-out", out, "-skip-checks")
	release.Dir = filepath.Join(root, "internal", "tools")
	release.Env = append(os.Environ(), "GOWORK=off")
	if b, err := release.CombinedOutput(); err != nil {
		t.Fatalf("the release's dry run: %v\n%s", err, b)
	}
	proxy := filepath.Join(out, "proxy")
	published := proxyModules(t, proxy, version)
	for _, want := range []string{"", "/adapters/gorm", "/adapters/kafka", "/adapters/nats", "/adapters/prometheus",
		"/middleware/gin", "/fxmodule", "/cmd/outbox"} {
		if !slices.Contains(published, rootPath+want) {
			t.Fatalf("the release does not publish %s%s (it publishes %q)", rootPath, want, published)
		}
	}

	modcache := goEnv(t, "GOMODCACHE")
	cleanModCache(t, modcache, version, time.Now().Add(-24*time.Hour))
	t.Cleanup(func() { cleanModCache(t, modcache, version, time.Now().Add(-24*time.Hour)) })
	u := &user{
		version: version,
		env: userEnv(
			// Our modules from the release's proxy. Third-party modules from this
			// machine's module cache (a download cache has a proxy's layout), so that the
			// test runs offline once the cache holds them; proxy.golang.org for what it
			// does not hold yet (a user's graph lists some versions the workspace never
			// downloads, those required by the tests of the modules we require).
			"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(filepath.Join(modcache, "cache", "download"))+",https://proxy.golang.org",
			// No checksum database knows the test version, and a fresh consumer would
			// ask sum.golang.org about every third-party module, which needs the
			// network; those come from the module cache, checked when it downloaded them.
			"GOSUMDB=off",
			// The consumer is a new module whose go.mod and go.sum the go command writes,
			// as on a user's machine; CI exports -mod=readonly for the repository.
			"GOFLAGS=-mod=mod",
			// A user's module: no go.work above it, and the go command installed here.
			"GOWORK=off", "GOTOOLCHAIN=local",
		),
	}

	var mu sync.Mutex
	counts := map[string]int{}
	t.Cleanup(func() {
		var sb strings.Builder
		for _, name := range slices.Sorted(maps.Keys(counts)) {
			fmt.Fprintf(&sb, "\n\t%-52s %3d modules", name, counts[name])
		}
		t.Logf("go list -m all | wc -l of each consumer at %s:%s", version, sb.String())
	})
	record := func(name string, n int) {
		mu.Lock()
		counts[name] = n
		mu.Unlock()
	}

	t.Run("module", func(t *testing.T) {
		for _, mod := range published {
			if mod == rootPath+"/cmd/outbox" {
				continue
			}
			pkg := mod
			if mod == rootPath {
				pkg = rootPath + "/core"
			}
			name := strings.TrimPrefix(strings.TrimPrefix(pkg, rootPath), "/")
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				c := u.consumer(t)
				c.write(t, "main.go", fmt.Sprintf("package main\n\nimport _ %q\n\nfunc main() {}\n", pkg))
				c.goCmd(t, "get", pkg+"@"+version)
				c.goCmd(t, "mod", "tidy")
				mods := c.modules(t)
				record(name, len(mods))
				c.checkGraph(t, mods, banned[name]...)
				if name == "core" && len(mods) > 10 {
					t.Errorf("a program importing only the core sees %d modules, more than 10:\n%s", len(mods), strings.Join(mods, "\n"))
				}
			})
		}
	})

	t.Run("app", func(t *testing.T) {
		t.Parallel()
		c := u.consumer(t)
		c.write(t, "main.go", appProgram)
		var get []string
		for _, p := range []string{"/core", "/middleware/gin", "/adapters/gorm", "/fxmodule", "/adapters/prometheus"} {
			get = append(get, rootPath+p+"@"+version)
		}
		// The program's own database driver, at the version the repository's tests use.
		for _, m := range []string{"gorm.io/driver/postgres", "github.com/jackc/pgx/v5"} {
			get = append(get, m+"@"+workspaceVersion(t, root, m))
		}
		c.goCmd(t, append([]string{"get"}, get...)...)
		c.goCmd(t, "mod", "tidy")
		c.goCmd(t, "build", "-o", filepath.Join(c.dir, "app"), ".")
		mods := c.modules(t)
		record("app: core, gin, gorm (PostgreSQL), fx, Prometheus", len(mods))
		c.checkGraph(t, mods, "github.com/labstack/echo", "github.com/uptrace/bun", "github.com/jmoiron/sqlx", "github.com/chromedp/",
			"github.com/twmb/franz-go", "github.com/nats-io/", "go.opentelemetry.io/otel")
	})

	t.Run("go install cmd/outbox", func(t *testing.T) {
		t.Parallel()
		c := u.consumer(t)
		bin := filepath.Join(c.dir, "bin")
		c.env = append(c.env, "GOBIN="+bin)
		c.goCmd(t, "install", rootPath+"/cmd/outbox@"+version)
		// The installed tool works: it creates the outbox table in a new SQLite database
		// and reports its schema.
		dsn := filepath.Join(c.dir, "outbox.db")
		for _, args := range [][]string{{"migrate"}, {"migrate", "-status"}} {
			cmd := exec.Command(filepath.Join(bin, "outbox"), append([]string{"-db", "sqlite", "-dsn", dsn}, args...)...)
			cmd.Env = append(os.Environ(), "OUTBOX_DB=", "OUTBOX_DSN=")
			b, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("outbox %s: %v\n%s", strings.Join(args, " "), err, b)
			}
			if args[len(args)-1] == "-status" && !strings.Contains(string(b), "up to date") {
				t.Fatalf("outbox migrate -status: %s", b)
			}
		}
	})
}

// banned lists, per consumer of one module, the module path prefixes its graph must not
// hold: a relay brings its own broker's client, and no other broker's nor OpenTelemetry.
var banned = map[string][]string{
	"adapters/kafka": {"github.com/nats-io/", "go.opentelemetry.io/otel"},
	"adapters/nats":  {"github.com/twmb/franz-go", "go.opentelemetry.io/otel"},
	"adapters/otel":  {"github.com/twmb/franz-go", "github.com/nats-io/"},
}

// appProgram is a user's program on the core, gin, gorm, fx and Prometheus: an orders
// endpoint whose order and event commit in one gorm transaction, the admin and the
// metrics mounted in gin, and the outbox started and stopped by fx.
const appProgram = `package main

import (
	"context"
	"database/sql"
	"net/http"
	"os"

	"github.com/gin-gonic/gin"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/fx"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"

	outboxgorm "github.com/outboxkit/outbox/adapters/gorm"
	outboxprom "github.com/outboxkit/outbox/adapters/prometheus"
	outbox "github.com/outboxkit/outbox/core"
	outboxfx "github.com/outboxkit/outbox/fxmodule"
	outboxgin "github.com/outboxkit/outbox/middleware/gin"
)

func openDB(lc fx.Lifecycle) (*sql.DB, error) {
	db, err := sql.Open("pgx", os.Getenv("DATABASE_URL"))
	if err != nil {
		return nil, err
	}
	lc.Append(fx.StopHook(db.Close))
	return db, outbox.Migrate(context.Background(), db, outbox.Postgres)
}

func openGorm(db *sql.DB) (*gorm.DB, error) {
	return gorm.Open(postgres.New(postgres.Config{Conn: db}), &gorm.Config{})
}

func newMetrics() (*prometheus.Registry, *outboxprom.Metrics, error) {
	reg := prometheus.NewRegistry()
	m, err := outboxprom.New(reg, outboxprom.Options{})
	return reg, m, err
}

func newConfig(m *outboxprom.Metrics) outboxfx.Config {
	return outboxfx.Config{Dialect: outbox.Postgres, Metrics: m}
}

func newMailer() outboxfx.Listener {
	return outboxfx.Listener{
		AggregateType: "Order", EventType: "OrderPlaced",
		Listener: outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error { return nil }),
	}
}

func newRouter(db *gorm.DB, w *outbox.Writer, admin outboxfx.AdminHandler, reg *prometheus.Registry) *gin.Engine {
	r := gin.New()
	r.POST("/orders", func(c *gin.Context) {
		err := outboxgorm.Transaction(c.Request.Context(), db, func(tx *gorm.DB) error {
			if err := tx.Exec("INSERT INTO orders (id) VALUES (?)", "o-1").Error; err != nil {
				return err
			}
			_, err := outboxgorm.Write(tx, w, outbox.Envelope{
				Type: "OrderPlaced", AggregateType: "Order", AggregateID: "o-1", Payload: map[string]int{"total_cents": 4200},
			})
			return err
		})
		if err != nil {
			c.Status(http.StatusInternalServerError)
			return
		}
		c.Status(http.StatusCreated)
	})
	outboxgin.Mount(r.Group("/outbox/admin"), admin)
	r.GET("/metrics", gin.WrapH(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	return r
}

func main() {
	fx.New(
		outboxfx.Module,
		fx.Provide(openDB, openGorm, newMetrics, newConfig, newRouter, outboxfx.AsListener(newMailer)),
		fx.Invoke(func(lc fx.Lifecycle, r *gin.Engine) {
			srv := &http.Server{Addr: ":8080", Handler: r}
			lc.Append(fx.StartStopHook(func() { go srv.ListenAndServe() }, srv.Shutdown))
		}),
	).Run()
}
`

// user runs the go command as a user of the published modules.
type user struct {
	version string
	env     []string
}

// consumer is a fresh module of a user.
type consumer struct {
	dir     string
	env     []string
	version string // of our modules
}

// consumer creates a new module, example.com/consumer, in a directory of its own.
func (u *user) consumer(t *testing.T) *consumer {
	t.Helper()
	c := &consumer{dir: t.TempDir(), env: slices.Clone(u.env), version: u.version}
	c.goCmd(t, "mod", "init", "example.com/consumer")
	return c
}

func (c *consumer) write(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(c.dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// goCmd runs the go command in the consumer and returns its standard output.
func (c *consumer) goCmd(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = c.dir
	cmd.Env = c.env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		gomod, _ := os.ReadFile(filepath.Join(c.dir, "go.mod"))
		t.Fatalf("go %s: %v\n%s%s\ngo.mod:\n%s", strings.Join(args, " "), err, out, stderr.String(), gomod)
	}
	return string(out)
}

// modules returns the consumer's go list -m all, one "path version" a line.
func (c *consumer) modules(t *testing.T) []string {
	t.Helper()
	return strings.Split(strings.TrimSpace(c.goCmd(t, "list", "-m", "all")), "\n")
}

// checkGraph fails the test if the module graph mods holds an unpublished module of
// this repository, one of ours at another version than the test's, or a module whose
// path starts with one of banned.
func (c *consumer) checkGraph(t *testing.T, mods []string, banned ...string) {
	t.Helper()
	for _, m := range mods[1:] { // the first is the consumer
		p, v, _ := strings.Cut(m, " ")
		switch {
		case p == rootPath+"/internal" || strings.HasPrefix(p, rootPath+"/internal/"):
			t.Errorf("the module graph holds %s, which is not published", m)
		case (p == rootPath || strings.HasPrefix(p, rootPath+"/")) && v != c.version:
			t.Errorf("the module graph holds %s, not at the release's version %s", m, c.version)
		}
		for _, b := range banned {
			if strings.HasPrefix(p, b) {
				t.Errorf("the module graph holds %s", m)
			}
		}
	}
	if t.Failed() {
		t.Logf("go list -m all:\n%s", strings.Join(mods, "\n"))
	}
}

// userEnv returns the test's environment without the go command's settings that a
// user's machine would not share with this repository's tests, plus set.
func userEnv(set ...string) []string {
	drop := []string{"GOFLAGS", "GOWORK", "GOPROXY", "GONOPROXY", "GOPRIVATE", "GONOSUMDB", "GONOSUMCHECK",
		"GOSUMDB", "GOINSECURE", "GOTOOLCHAIN", "GOBIN"}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(drop, k) {
			env = append(env, kv)
		}
	}
	return append(env, set...)
}

// proxyModules returns the paths of the modules the proxy in dir holds at version.
func proxyModules(t *testing.T, dir, version string) []string {
	t.Helper()
	var mods []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != version+".zip" {
			return err
		}
		rel, err := filepath.Rel(dir, filepath.Dir(filepath.Dir(p)))
		if err != nil {
			return err
		}
		mod, err := module.UnescapePath(filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		mods = append(mods, mod)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(mods)
	return mods
}

// workspaceVersion returns the version of module m that the repository's workspace
// builds with.
func workspaceVersion(t *testing.T, root, m string) string {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Version}}", m)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", m, err)
	}
	return strings.TrimSpace(string(out))
}

// goEnv returns the go command's setting of key.
func goEnv(t *testing.T, key string) string {
	t.Helper()
	out, err := exec.Command("go", "env", key).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", key, err)
	}
	return strings.TrimSpace(string(out))
}

// cleanModCache removes from the module cache the modules of this repository at
// version, and at test versions made before stale (runs that were killed), with their
// downloads, and lists in each list file of the download cache only the versions whose
// go.mod is still there, as the go command writes it.
func cleanModCache(t *testing.T, modcache, version string, stale time.Time) {
	t.Helper()
	esc, err := module.EscapePath(rootPath)
	if err != nil {
		t.Fatal(err)
	}
	isOurs := func(v string) bool {
		if v == version {
			return true
		}
		ns, ok := strings.CutPrefix(v, versionPrefix)
		n, err := strconv.ParseInt(ns, 10, 64)
		return ok && err == nil && time.Unix(0, n).Before(stale)
	}
	parent := filepath.Join(modcache, filepath.FromSlash(path.Dir(esc))) // .../github.com/outboxkit
	download := filepath.Join(modcache, "cache", "download", filepath.FromSlash(path.Dir(esc)))
	var remove []string
	lists := map[string]bool{}
	for _, dir := range []string{parent, download} {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) {
					return nil
				}
				return err
			}
			name := d.Name()
			if d.IsDir() {
				if _, v, ok := strings.Cut(name, "@"); ok && isOurs(v) {
					remove = append(remove, p)
					return filepath.SkipDir
				}
				return nil
			}
			if filepath.Base(filepath.Dir(p)) == "@v" {
				if v := strings.TrimSuffix(name, path.Ext(name)); isOurs(v) {
					remove = append(remove, p)
					lists[filepath.Join(filepath.Dir(p), "list")] = true
				}
			}
			return nil
		})
		if err != nil {
			t.Errorf("clean the module cache: %v", err)
		}
	}
	for _, p := range remove {
		// The module cache makes its directories read-only.
		filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				os.Chmod(q, 0o755)
			}
			return nil
		})
		if err := os.RemoveAll(p); err != nil {
			t.Errorf("clean the module cache: %v", err)
		}
	}
	for list := range lists {
		mods, _ := filepath.Glob(filepath.Join(filepath.Dir(list), "*.mod"))
		var versions []string
		for _, m := range mods {
			versions = append(versions, strings.TrimSuffix(filepath.Base(m), ".mod"))
		}
		semver.Sort(versions)
		var err error
		if len(versions) == 0 {
			err = os.Remove(list)
			if os.IsNotExist(err) {
				err = nil
			}
		} else {
			err = os.WriteFile(list, []byte(strings.Join(versions, "\n")+"\n"), 0o644)
		}
		if err != nil {
			t.Errorf("clean the module cache: %v", err)
		}
	}
	// The directories this test's downloads created, now empty.
	for _, dir := range []string{parent, download} {
		var dirs []string
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for _, d := range slices.Backward(dirs) {
			os.Remove(d) // fails, as it should, unless d is empty
		}
	}
}

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
