package outbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
	"github.com/outboxkit/outbox/internal/fuzztally"
	"github.com/outboxkit/outbox/internal/testdb"
)

// FuzzStoredRow writes a row straight into an SQLite table (which, unlike PostgreSQL's
// jsonb and MariaDB's JSON check, stores any text) and reads it back through the
// store's reads: Get and ListDead (lenient: an undecodable payload or headers is shown,
// not hidden), Pending (strict: what is delivered). A row that cannot be decoded must
// come back as a RowError naming its ID, never as a panic or another error, and a
// decoded event must carry a valid JSON payload. Writing the same payload and headers
// through the Writer, when it accepts them, must read back unchanged. Seeds are in
// testdata/fuzz; plain `go test` replays them.
func FuzzStoredRow(f *testing.F) {
	f.Add(`{"id":1}`, `{"trace":"abc"}`, "2026-01-02T03:04:05.000000Z", "2026-01-02T03:04:05.000000Z", uint8(0))
	f.Add(`{"id":`, `{"k":1}`, "2026-01-02T03:04:05Z", "2026-01-02 03:04:05", uint8(3))
	f.Add(`"\ud800"`, `null`, "2026-01-02T03:04:05.1+05:45", "garbage", uint8(2))
	f.Add("\xff", "{\"k\":\"\xfe\"}", "", "9999-12-31T23:59:59.999999Z", uint8(1))
	f.Add(`[1,2]`, `[]`, "0001-01-01T00:00:00Z", "0001-01-01T00:00:00Z", uint8(9))
	db := testdb.NewSQLiteDB(f)
	ctx := context.Background()
	if err := outbox.Migrate(ctx, db, outbox.SQLite); err != nil {
		f.Fatal(err)
	}
	store, err := sqlStore(db, outbox.SQLite, outbox.SQLStoreConfig{})
	if err != nil {
		f.Fatal(err)
	}
	ob, err := outbox.New(db, outbox.Config{Mode: outbox.WriterOnly, Store: store, PurgeInterval: -1, Logger: discardLogger()})
	if err != nil {
		f.Fatal(err)
	}
	w := ob.Writer()
	if err != nil {
		f.Fatal(err)
	}
	far := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, payload, headers, createdAt, availableAt string, status uint8) {
		if _, err := db.ExecContext(ctx, `DELETE FROM outbox_event`); err != nil {
			t.Fatal(err)
		}
		id := outbox.NewID()
		var h any
		if headers != "" {
			h = headers
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO outbox_event
			(event_id, event_type, aggregate_type, payload, headers, status, attempts, available_at, created_at, done_at)
			VALUES (?, 'T', 'A', ?, ?, ?, 0, ?, ?, ?)`, id, payload, h, int(status%4), availableAt, createdAt, createdAt); err != nil {
			t.Fatalf("insert: %v", err)
		}

		checkErr := func(what string, err error) bool {
			t.Helper()
			if err == nil {
				return true
			}
			var re outbox.RowError
			if !errors.As(err, &re) || re.EventID != id {
				t.Fatalf("%s: %v, want a RowError for %s", what, err, id)
			}
			return false
		}
		checkEvent := func(what string, e outbox.Event) {
			t.Helper()
			if e.ID != id || e.Type != "T" || e.AggregateType != "A" || !json.Valid(e.Payload) ||
				e.CreatedAt.Location() != time.UTC || e.AvailableAt.Location() != time.UTC {
				t.Fatalf("%s returned %+v", what, e)
			}
		}

		got, err := store.Get(ctx, id)
		lenientOK := checkErr("Get", err)
		if lenientOK {
			checkEvent("Get", got)
		}
		if _, err := db.ExecContext(ctx, `UPDATE outbox_event SET status = 3`); err != nil {
			t.Fatal(err)
		}
		dead, err := store.ListDead(ctx, storage.ListDeadParams{Limit: 10})
		if checkErr("ListDead", err) != lenientOK || (lenientOK && len(dead) != 1) {
			t.Fatalf("ListDead = %d events, %v; Get decoded: %v", len(dead), err, lenientOK)
		}
		if lenientOK {
			checkEvent("ListDead", dead[0])
		}
		if _, err := db.ExecContext(ctx, `UPDATE outbox_event SET status = 0`); err != nil {
			t.Fatal(err)
		}
		batch, err := store.Pending(ctx, storage.PendingParams{Now: far, Limit: 10})
		if err != nil {
			t.Fatalf("Pending: %v", err)
		}
		for _, re := range batch.Undecodable {
			checkErr("Pending", re)
		}
		fuzztally.Record(!lenientOK || len(batch.Undecodable) > 0)
		for _, e := range batch.Events {
			checkEvent("Pending", e)
			if !lenientOK || !bytes.Equal(e.Payload, got.Payload) || !maps.Equal(e.Headers, got.Headers) {
				t.Fatalf("Pending decoded %+v, Get %+v (%v)", e, got, lenientOK)
			}
		}
		if len(batch.Events)+len(batch.Undecodable) > 1 {
			t.Fatalf("Pending returned %d rows for one", len(batch.Events)+len(batch.Undecodable))
		}

		// The same payload and headers written through the Writer read back unchanged.
		var hm map[string]string
		if json.Unmarshal([]byte(headers), &hm) != nil {
			hm = map[string]string{"h": headers}
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		wid, err := w.Write(ctx, tx, outbox.Envelope{Type: "T", Payload: json.RawMessage(payload), Headers: hm})
		if err != nil {
			if !errors.Is(err, outbox.ErrInvalidEnvelope) {
				t.Fatalf("Write: untyped error %v", err)
			}
			return
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		back, err := store.Get(ctx, wid)
		if err != nil || !bytes.Equal(back.Payload, []byte(payload)) || !maps.Equal(back.Headers, nilIfEmpty(hm)) {
			t.Fatalf("written payload %q headers %v read back as %q %v, %v", payload, hm, back.Payload, back.Headers, err)
		}
	})
}

func nilIfEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}
