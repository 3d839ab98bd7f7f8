package outbox_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// A store on SQLite: migrate, insert an event in the business transaction, poll it and
// mark it done.
func Example_newSQLStore() {
	dir, _ := os.MkdirTemp("", "outbox-example")
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", outbox.SQLiteDSN(filepath.Join(dir, "app.db")))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	ctx := context.Background()
	if err := outbox.Migrate(ctx, db, outbox.SQLite); err != nil {
		fmt.Println(err)
		return
	}
	store, err := outbox.NewSQLStore(db, outbox.SQLite, outbox.SQLStoreConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	created := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	_, err = store.Insert(ctx, tx, storage.InsertParams{Events: []outbox.Event{{
		ID: "evt-1", Type: "OrderPlaced", AggregateType: "Order", AggregateID: "42",
		Payload: json.RawMessage(`{"total":99}`), CreatedAt: created, AvailableAt: created,
	}}})
	if err != nil {
		_ = tx.Rollback()
		fmt.Println(err)
		return
	}
	if err := tx.Commit(); err != nil {
		fmt.Println(err)
		return
	}

	batch, err := store.Pending(ctx, storage.PendingParams{Now: created.Add(time.Minute), Limit: 10})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range batch.Events {
		fmt.Println(e.ID, e.Type, e.Status, string(e.Payload))
	}
	n, err := store.MarkDone(ctx, storage.MarkDoneParams{IDs: []string{"evt-1"}, DoneAt: created.Add(time.Minute)})
	fmt.Println("marked done:", n, err)
	// Output:
	// evt-1 OrderPlaced NEW {"total":99}
	// marked done: 1 <nil>
}

// A MySQL or MariaDB DSN for github.com/go-sql-driver/mysql carries MySQLDSNParams, so
// that times are DATETIME values in UTC that scan as time.Time. Outbox.Start (through
// SQLStore.CheckConnection) rejects a DSN without them.
func Example_mySQLDSNParams() {
	dsn := "app:secret@tcp(127.0.0.1:3306)/shop?" + outbox.MySQLDSNParams
	fmt.Println(dsn)
	// With the driver's Config instead: ParseTime: true, Loc: time.UTC.

	// Output: app:secret@tcp(127.0.0.1:3306)/shop?parseTime=true&loc=UTC
}
