package outboxhttp_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite"

	outbox "github.com/outboxkit/outbox/core"
	outboxhttp "github.com/outboxkit/outbox/middleware/nethttp"
)

// openExampleDB opens a fresh SQLite database.
func openExampleDB() (*sql.DB, func()) {
	dir, err := os.MkdirTemp("", "outboxhttp-example-*")
	if err != nil {
		panic(err)
	}
	db, err := sql.Open("sqlite", outbox.SQLiteDSN(filepath.Join(dir, "example.db")))
	if err != nil {
		panic(err)
	}
	return db, func() { db.Close(); os.RemoveAll(dir) }
}

// ExampleTxPerRequest runs every request in a transaction: the handler writes the
// business row and the event through the request's transaction, which commits before
// the 201 is sent, and the event is delivered right after the commit.
func Example_txPerRequest() {
	db, cleanup := openExampleDB()
	defer cleanup()
	ctx := context.Background()
	if err := outbox.Migrate(ctx, db, outbox.SQLite); err != nil {
		panic(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY)`); err != nil {
		panic(err)
	}
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
	if err := ob.Start(ctx); err != nil {
		panic(err)
	}
	defer ob.Stop(ctx)

	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		tx, _ := outboxhttp.TxFromRequest(r)
		id := r.PathValue("id")
		if _, err := tx.ExecContext(r.Context(), `INSERT INTO orders (id) VALUES (?)`, id); err != nil {
			http.Error(w, "conflict", http.StatusConflict) // rolls back
			return
		}
		_, err := ob.Writer().Write(r.Context(), tx, outbox.Envelope{
			Type: "OrderPlaced", AggregateType: "Order", AggregateID: id, Payload: map[string]string{"id": id},
		})
		if err != nil {
			http.Error(w, "internal error", http.StatusInternalServerError) // rolls back
			return
		}
		w.WriteHeader(http.StatusCreated) // commits, then sends 201
		_ = json.NewEncoder(w).Encode(map[string]string{"id": id})
	})
	srv := httptest.NewServer(outboxhttp.TxPerRequest(db, outboxhttp.Config{})(mux))
	defer srv.Close()

	for range 2 {
		resp, err := http.Post(srv.URL+"/orders/o-1", "application/json", nil)
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
