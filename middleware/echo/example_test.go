package outboxecho_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/labstack/echo/v4"
	_ "modernc.org/sqlite"

	outboxadmin "github.com/outboxkit/outbox/admin"
	outbox "github.com/outboxkit/outbox/core"
	outboxecho "github.com/outboxkit/outbox/middleware/echo"
	outboxhttp "github.com/outboxkit/outbox/middleware/nethttp"
)

// openExampleDB opens a fresh SQLite database with an outbox table and an orders table.
func openExampleDB() (*sql.DB, func()) {
	dir, err := os.MkdirTemp("", "outboxecho-example-*")
	if err != nil {
		panic(err)
	}
	db, err := sql.Open("sqlite", outbox.SQLiteDSN(filepath.Join(dir, "example.db")))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := outbox.Migrate(ctx, db, outbox.SQLite); err != nil {
		panic(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY)`); err != nil {
		panic(err)
	}
	return db, func() { db.Close(); os.RemoveAll(dir) }
}

func get(url, token string) int {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		panic(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// ExampleMount serves the dead-event admin at /outbox/admin on an echo router.
func ExampleMount() {
	db, cleanup := openExampleDB()
	defer cleanup()
	ob, err := outbox.New(db, outbox.Config{Dialect: outbox.SQLite})
	if err != nil {
		panic(err)
	}

	admin, err := outboxadmin.New(ob.Events(), outboxadmin.Options{Authorize: outboxadmin.BearerToken("s3cret")})
	if err != nil {
		panic(err)
	}
	e := echo.New()
	outboxecho.Mount(e.Group("/outbox/admin"), admin)

	srv := httptest.NewServer(e)
	defer srv.Close()
	fmt.Println(get(srv.URL+"/outbox/admin/api/dead-events/count", "s3cret"))
	fmt.Println(get(srv.URL+"/outbox/admin/api/dead-events/count", ""))
	// Output:
	// 200
	// 401
}

// ExampleTxPerRequest runs the order handlers in a transaction per request: the order
// row and its event commit together before the 201 is sent, and the event is delivered
// right after the commit. The second request fails on the duplicate key: the returned
// 409 rolls the transaction back.
func ExampleTxPerRequest() {
	db, cleanup := openExampleDB()
	defer cleanup()
	ob, err := outbox.New(db, outbox.Config{Dialect: outbox.SQLite})
	if err != nil {
		panic(err)
	}
	delivered := make(chan string, 1)
	err = ob.Register("Order", "OrderPlaced", outbox.ListenerFunc(func(_ context.Context, e *outbox.Event) error {
		delivered <- e.Type + " " + e.AggregateID
		return nil
	}))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := ob.Start(ctx); err != nil {
		panic(err)
	}
	defer ob.Stop(ctx)

	e := echo.New()
	api := e.Group("/api", outboxecho.TxPerRequest(db, outboxhttp.Config{}))
	api.POST("/orders/:id", func(c echo.Context) error {
		tx, _ := outboxecho.Tx(c)
		ctx, id := c.Request().Context(), c.Param("id")
		if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id) VALUES (?)`, id); err != nil {
			return echo.NewHTTPError(http.StatusConflict, "order exists") // rolls back
		}
		env := outbox.Envelope{Type: "OrderPlaced", AggregateType: "Order", AggregateID: id, Payload: map[string]string{"id": id}}
		if _, err := ob.Writer().Write(ctx, tx, env); err != nil {
			return err // rolls back; the error handler answers 500
		}
		return c.JSON(http.StatusCreated, map[string]string{"id": id}) // commits, then sends 201
	})

	srv := httptest.NewServer(e)
	defer srv.Close()
	for range 2 {
		resp, err := http.Post(srv.URL+"/api/orders/o-1", "application/json", nil)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode)
	}
	fmt.Println(<-delivered)
	// Output:
	// 201
	// 409
	// OrderPlaced o-1
}
