package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/goleak"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/internal/exampletest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSmoke builds and runs the quickstart as the README says, and checks its whole
// story over HTTP; its temporary database is gone when it has exited.
func TestSmoke(t *testing.T) {
	t.Parallel()
	res := exampletest.Run(t, exampletest.Options{Pkg: "./examples/quickstart"})
	if _, err := os.Stat(filepath.Dir(res.Database)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the temporary directory of %s is still there after exit (stat: %v)", res.Database, err)
	}
}

// TestSmokeReusesDB runs the quickstart with -db on a database that exists already:
// the tables are kept, and so is the file after exit.
func TestSmokeReusesDB(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "kept.db")
	initDB(t, path)
	res := exampletest.Run(t, exampletest.Options{Pkg: "./examples/quickstart", Args: []string{"-db", path}})
	if res.Database != path {
		t.Errorf("banner database = %q, want %q", res.Database, path)
	}
	if got := countOrders(t, path); got != 4 {
		t.Errorf("%d orders in %s, want 4: one before the run and three from it", got, path)
	}
}

// initDB creates the quickstart's tables at path, twice (migrations are idempotent),
// with one order.
func initDB(t *testing.T, path string) {
	t.Helper()
	for i := range 2 {
		lc := fxtest.NewLifecycle(t)
		db, err := openDB(lc, config{dbPath: path})
		if err != nil {
			t.Fatalf("openDB, run %d: %v", i+1, err)
		}
		gdb, err := openGorm(db, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("openGorm, run %d: %v", i+1, err)
		}
		if i == 0 {
			order := Order{ID: outbox.NewID(), Customer: "ada@example.com", Item: "book", Quantity: 1}
			if err := gdb.Create(&order).Error; err != nil {
				t.Fatalf("create order: %v", err)
			}
		}
		lc.RequireStart().RequireStop() // closes db
	}
}

func countOrders(t *testing.T, path string) int64 {
	t.Helper()
	lc := fxtest.NewLifecycle(t)
	db, err := openDB(lc, config{dbPath: path})
	if err != nil {
		t.Fatalf("openDB: %v", err)
	}
	gdb, err := openGorm(db, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("openGorm: %v", err)
	}
	var n int64
	if err := gdb.Model(&Order{}).Count(&n).Error; err != nil {
		t.Fatalf("count orders: %v", err)
	}
	lc.RequireStart().RequireStop() // closes db
	return n
}

// TestAppGraph checks that fx can build the whole app: every constructor finds what it
// needs. (It runs none of them.)
func TestAppGraph(t *testing.T) {
	t.Parallel()
	cfg := config{addr: "127.0.0.1:0", dbPath: filepath.Join(t.TempDir(), "q.db"), adminToken: "t"}
	if err := fx.ValidateApp(appOptions(cfg, slog.New(slog.DiscardHandler)), fx.Invoke(func(*httpServer) {})); err != nil {
		t.Fatal(err)
	}
}

func TestDecodeOrderRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body string
		want       orderRequest
		wantErr    string // "" for success
	}{
		{"valid", `{"customer":"ada@example.com","item":"book","quantity":1}`,
			orderRequest{Customer: "ada@example.com", Item: "book", Quantity: 1}, ""},
		{"bad JSON", `{"customer":`, orderRequest{}, "must be a JSON object"},
		{"not an object", `[1]`, orderRequest{}, "must be a JSON object"},
		{"empty", ``, orderRequest{}, "must be a JSON object"},
		{"unknown field", `{"customer":"ada@example.com","item":"book","quantity":1,"price":3}`, orderRequest{}, `unknown field "price"`},
		{"wrong type", `{"customer":"ada@example.com","item":"book","quantity":"1"}`, orderRequest{}, "must be a JSON object"},
		{"no customer", `{"item":"book","quantity":1}`, orderRequest{}, "customer must be an email address"},
		{"customer not an address", `{"customer":"ada","item":"book","quantity":1}`, orderRequest{}, "customer must be an email address"},
		{"no item", `{"customer":"ada@example.com","quantity":1}`, orderRequest{}, "item is required"},
		{"blank item", `{"customer":"ada@example.com","item":"  ","quantity":1}`, orderRequest{}, "item is required"},
		{"no quantity", `{"customer":"ada@example.com","item":"book"}`, orderRequest{}, "quantity must be at least 1"},
		{"negative quantity", `{"customer":"ada@example.com","item":"book","quantity":-2}`, orderRequest{}, "quantity must be at least 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := decodeOrderRequest(strings.NewReader(tt.body))
			if tt.wantErr == "" {
				if err != nil || got != tt.want {
					t.Errorf("got %+v, %v; want %+v", got, err, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestMailer(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	m := &mailer{logger: slog.New(slog.NewTextHandler(&logs, nil))}
	handle := func(to string) error {
		payload, _ := json.Marshal(confirmationEmail{OrderID: "o-1", To: to})
		return m.Handle(context.Background(), &outbox.Event{ID: "e-1", Type: eventConfirmationEmail, Payload: payload, Attempts: 1})
	}

	if err := handle("ada@example.com"); err != nil {
		t.Errorf("ada@example.com: %v, want nil", err)
	}
	err := handle("bob@bounce.example")
	if err == nil || err.Error() != "mailbox unavailable: bob@bounce.example" || errors.Is(err, outbox.ErrUnrecoverable) {
		t.Errorf("bob@bounce.example: %v, want a retryable mailbox unavailable: bob@bounce.example", err)
	}
	if want := `msg="sent confirmation email" event_id=e-1`; !strings.Contains(logs.String(), want) {
		t.Errorf("the log lacks %q:\n%s", want, logs.String())
	}

	bad := m.Handle(context.Background(), &outbox.Event{ID: "e-2", Payload: []byte(`"not an object"`)})
	if !errors.Is(bad, outbox.ErrUnrecoverable) {
		t.Errorf("bad payload: %v, want an error wrapping outbox.ErrUnrecoverable", bad)
	}
}

func TestAdminToken(t *testing.T) {
	t.Setenv("OUTBOX_ADMIN_TOKEN", "")
	a, errA := adminToken()
	b, errB := adminToken()
	if errA != nil || errB != nil || !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(a) || a == b {
		t.Errorf("adminToken() = %q, %v and %q, %v; want two different tokens of 32 hex characters", a, errA, b, errB)
	}
	t.Setenv("OUTBOX_ADMIN_TOKEN", "my-token")
	if got, err := adminToken(); got != "my-token" || err != nil {
		t.Errorf("with OUTBOX_ADMIN_TOKEN: %q, %v; want my-token", got, err)
	}
}

func TestPrintBanner(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	printBanner(&b, "http://127.0.0.1:8080", config{dbPath: "/tmp/outbox-quickstart-123456/quickstart.db", adminToken: "0123456789abcdef0123456789abcdef"})
	want := `outbox quickstart: gin + gorm + fx on SQLite
database  /tmp/outbox-quickstart-123456/quickstart.db

  orders   POST http://127.0.0.1:8080/orders
  admin    http://127.0.0.1:8080/outbox/admin/#token=0123456789abcdef0123456789abcdef
  metrics  http://127.0.0.1:8080/metrics

Try it:
  curl -s -X POST http://127.0.0.1:8080/orders -d '{"customer":"ada@example.com","item":"book","quantity":1}'
  curl -s -X POST http://127.0.0.1:8080/orders -d '{"customer":"bob@bounce.example","item":"lamp","quantity":2}'

The second order's confirmation email fails 3 times and ends DEAD: open the admin URL to see it
and replay it. Ctrl-C stops the server and drains the outbox.
`
	if b.String() != want {
		t.Errorf("banner:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestBuildsWithoutCgo: no package the quickstart links outside the standard library
// has cgo files, so its first build compiles Go alone (the README's first command must
// not wait for a C compiler).
func TestBuildsWithoutCgo(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if and .CgoFiles (not .Standard)}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	if cgo := strings.TrimSpace(string(out)); cgo != "" {
		t.Errorf("the quickstart links packages with cgo files:\n%s", cgo)
	}
}
