package outboxadmin_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	outboxadmin "github.com/outboxkit/outbox/admin"
	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/internal/testdb"
)

// TestAPIShowsARowTheDatabaseCannotReturn stores a row whose payload PostgreSQL cannot
// write out (its numbers write out to more than 1 GB, so every statement that returns
// the row fails with "out of memory") beside an ordinary one. The API's list of NEW
// events and the row's detail answer 200: the row is listed, and shown with a payload
// that says why it cannot be read, and its stored size.
func TestAPIShowsARowTheDatabaseCannotReturn(t *testing.T) {
	t.Parallel()
	db := testdb.NewPostgresDB(t)
	table := testdb.IsolatedTable(t, db, outbox.Postgres.Name())
	ctx := t.Context()
	if err := outbox.MigrateTable(ctx, db, outbox.Postgres, table); err != nil {
		t.Fatal(err)
	}
	// The server fails the row's read once it has built a gigabyte of text: seconds on a
	// quiet machine, more than the default QueryTimeout (10 s) on a loaded one, and a
	// row whose read alone times out is left out of a list (sqlisolate.go). The bound
	// is the configuration's, not the machine's speed.
	ob, err := outbox.New(db, outbox.Config{Mode: outbox.WriterOnly, Dialect: outbox.Postgres, Table: table,
		PurgeInterval: -1, QueryTimeout: 2 * time.Minute, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	err = outbox.RunInTx(ctx, db, func(ctx context.Context, tx *outbox.Tx) error {
		for range 2 {
			id, err := ob.Writer().Write(ctx, tx, outbox.Envelope{Type: "OrderPlaced", Payload: map[string]int{"n": 1}})
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		// As an earlier release or a hand-written INSERT could have stored it.
		_, err := tx.ExecContext(ctx, `UPDATE `+table+` SET payload = CAST($1 AS JSONB) WHERE event_id = $2`,
			"["+strings.Repeat("1e131071,", 8999)+"1e131071]", ids[1])
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	h, err := outboxadmin.New(ob.Events(), outboxadmin.Options{Authorize: outboxadmin.AllowAll(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	get := func(path string, v any) {
		t.Helper()
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d %s", path, resp.StatusCode, body)
		}
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("GET %s: %v in %s", path, err, body)
		}
	}
	var list struct {
		Events []struct {
			ID string `json:"id"`
		} `json:"events"`
	}
	get("/api/events?status=new", &list)
	if len(list.Events) != 2 || list.Events[1].ID != ids[1] {
		t.Fatalf("listed %+v, want both events", list.Events)
	}
	var detail struct {
		ID      string          `json:"id"`
		Payload json.RawMessage `json:"payload"`
	}
	get("/api/events/"+ids[1], &detail)
	var shown string
	if err := json.Unmarshal(detail.Payload, &shown); err != nil || !strings.Contains(shown, "out of memory") ||
		!strings.Contains(shown, "bytes as stored") {
		t.Errorf("the unreadable row's payload is shown as %.300s, want a text naming the error and the stored size", detail.Payload)
	}
}
