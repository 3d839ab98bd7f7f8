package outboxadmin_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	_ "modernc.org/sqlite"

	outboxadmin "github.com/outboxkit/outbox/admin"
	outbox "github.com/outboxkit/outbox/core"
)

// openExampleOutbox returns an Outbox over a fresh SQLite database. It is not started:
// the admin handler only needs its dead-event manager.
func openExampleOutbox() (*outbox.Outbox, func()) {
	dir, err := os.MkdirTemp("", "outboxadmin-example-*")
	if err != nil {
		panic(err)
	}
	db, err := sql.Open("sqlite", outbox.SQLiteDSN(filepath.Join(dir, "example.db")))
	if err != nil {
		panic(err)
	}
	cleanup := func() { db.Close(); os.RemoveAll(dir) }
	if err := outbox.Migrate(context.Background(), db, outbox.SQLite); err != nil {
		panic(err)
	}
	ob, err := outbox.New(db, outbox.Config{Dialect: outbox.SQLite})
	if err != nil {
		panic(err)
	}
	return ob, cleanup
}

// ExampleNew mounts the admin at /outbox/admin behind a bearer token. A quickstart
// would generate the token at start (crypto/rand.Text) and print
// http://127.0.0.1:8080/outbox/admin/#token=<token>: the page reads the token from the
// fragment, which never reaches the server's logs.
func Example_new() {
	ob, cleanup := openExampleOutbox()
	defer cleanup()

	token := "s3cr3t-example-token" // use crypto/rand.Text()
	admin, err := outboxadmin.New(ob.Events(), outboxadmin.Options{Authorize: outboxadmin.BearerToken(token)})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/outbox/admin/", http.StripPrefix("/outbox/admin", admin))

	for _, auth := range []string{"", "Bearer " + token} {
		req := httptest.NewRequest(http.MethodGet, "/outbox/admin/api/dead-events/count", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		fmt.Print(rec.Code, " ", rec.Body.String())
	}
	// Output:
	// 401 {"error":{"code":"unauthorized","message":"authentication required"}}
	// 200 {"count":0,"at_least":false,"count_limit":10000}
}

// ExampleAuthorizerFunc reuses the application's own check, here a header that an
// authenticating proxy sets.
func Example_authorizerFunc() {
	ob, cleanup := openExampleOutbox()
	defer cleanup()

	admin, err := outboxadmin.New(ob.Events(), outboxadmin.Options{
		Authorize: outboxadmin.AuthorizerFunc(func(r *http.Request) bool {
			return r.Header.Get("X-Auth-Role") == "ops"
		}),
	})
	if err != nil {
		panic(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/api/dead-events/replay", strings.NewReader(`{"event_type":"PaymentRequested"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Auth-Role", "ops")
	rec := httptest.NewRecorder()
	admin.ServeHTTP(rec, req)
	fmt.Print(rec.Code, " ", rec.Body.String())
	// Output:
	// 200 {"replayed":0}
}

// Example_actor names who makes each change: here the user an authenticating proxy put
// in a header. Every replay, discard and delete through the admin is recorded in the
// audit trail under that name, and GET api/audit lists it.
func Example_actor() {
	ob, cleanup := openExampleOutbox()
	defer cleanup()

	admin, err := outboxadmin.New(ob.Events(), outboxadmin.Options{
		Authorize: outboxadmin.AuthorizerFunc(func(r *http.Request) bool { return r.Header.Get("X-Auth-Role") == "ops" }),
		Actor:     func(r *http.Request) string { return r.Header.Get("X-Auth-User") },
	})
	if err != nil {
		panic(err)
	}
	serve := func(method, path, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Auth-Role", "ops")
		req.Header.Set("X-Auth-User", "alice@example.com")
		rec := httptest.NewRecorder()
		admin.ServeHTTP(rec, req)
		return rec
	}
	// A bulk replay of two events that are not DEAD (here: that do not exist) changes
	// nothing, and is recorded all the same.
	rec := serve(http.MethodPost, "/api/events/replay", `{"ids":["01JZ0000000000000000000000","01JZ0000000000000000000001"]}`)
	fmt.Print(rec.Code, " ", rec.Body.String())

	var trail struct {
		Entries []struct {
			Actor, Action, Target string
			Count                 int64
		}
	}
	if err := json.Unmarshal(serve(http.MethodGet, "/api/audit", "").Body.Bytes(), &trail); err != nil {
		panic(err)
	}
	for _, e := range trail.Entries {
		fmt.Println(e.Actor, e.Action, e.Count, e.Target)
	}
	// Output:
	// 200 {"count":0,"requested":2}
	// alice@example.com replay 0 01JZ0000000000000000000000,01JZ0000000000000000000001
}
