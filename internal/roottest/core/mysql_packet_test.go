package outbox_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/internal/testdb"
)

// mysqlPayloadLimit returns the session's max_allowed_packet and the largest
// MaxPayloadBytes that Start accepts with it: (max_allowed_packet - 64 KiB) / 2.
func mysqlPayloadLimit(t *testing.T, db *sql.DB) (maxPacket int64, limit int) {
	t.Helper()
	if err := db.QueryRowContext(t.Context(), `SELECT @@max_allowed_packet`).Scan(&maxPacket); err != nil {
		t.Fatal(err)
	}
	return maxPacket, int((maxPacket - 64<<10) / 2)
}

// TestMySQLStartChecksMaxPayloadAgainstPacket checks that Start rejects a
// MaxPayloadBytes whose events would not fit the server's max_allowed_packet with a
// ConfigError naming both, and accepts the largest one that fits.
func TestMySQLStartChecksMaxPayloadAgainstPacket(t *testing.T) {
	t.Parallel()
	db := testdb.NewMySQLDB(t)
	table := testdb.IsolatedTable(t, db, outbox.MySQL.Name())
	if err := outbox.MigrateTable(t.Context(), db, outbox.MySQL, table); err != nil {
		t.Fatal(err)
	}
	maxPacket, limit := mysqlPayloadLimit(t, db)
	start := func(maxPayload int, mode outbox.Mode) error {
		ob, err := outbox.New(db, outbox.Config{Mode: mode, Dialect: outbox.MySQL, Table: table, MaxPayloadBytes: maxPayload,
			PurgeInterval: -1, Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}
		err = ob.Start(t.Context())
		if stopErr := ob.Stop(context.Background()); stopErr != nil {
			t.Error(stopErr)
		}
		return err
	}
	for _, mode := range []outbox.Mode{outbox.WriterOnly, outbox.SingleNode} {
		for _, tooLarge := range []int{limit + 1, int(maxPacket)} {
			err := start(tooLarge, mode)
			var ce *outbox.ConfigError
			if !errors.As(err, &ce) || ce.Field != "MaxPayloadBytes" || !errors.Is(err, outbox.ErrInvalidConfig) {
				t.Fatalf("%v: Start with MaxPayloadBytes %d (max_allowed_packet %d) = %v, want a ConfigError on MaxPayloadBytes",
					mode, tooLarge, maxPacket, err)
			}
			for _, want := range []string{"max_allowed_packet is " + strconv.FormatInt(maxPacket, 10), strconv.Itoa(tooLarge),
				"at most " + strconv.Itoa(limit)} {
				if !strings.Contains(ce.Reason, want) {
					t.Errorf("%v: reason %q does not name %q", mode, ce.Reason, want)
				}
			}
			t.Log(err)
		}
		for _, ok := range []int{limit, 0} { // 0: the default, 1 MiB
			if err := start(ok, mode); err != nil {
				t.Errorf("%v: Start with MaxPayloadBytes %d (max_allowed_packet %d) = %v", mode, ok, maxPacket, err)
			}
		}
	}
}

// TestMySQLDeliversEventAtPayloadLimit writes an event whose payload is as large as
// the largest MaxPayloadBytes Start accepts, full of characters that the driver's
// client-side interpolation escapes (the worst case), and checks that it is stored,
// delivered and read back whole, with and without interpolation.
func TestMySQLDeliversEventAtPayloadLimit(t *testing.T) {
	t.Parallel()
	for _, interpolate := range []bool{true, false} {
		t.Run("interpolateParams="+strconv.FormatBool(interpolate), func(t *testing.T) {
			db := openMySQL(t, func(cfg *mysql.Config) { cfg.InterpolateParams = interpolate })
			table := testdb.IsolatedTable(t, db, outbox.MySQL.Name())
			if err := outbox.MigrateTable(t.Context(), db, outbox.MySQL, table); err != nil {
				t.Fatal(err)
			}
			_, limit := mysqlPayloadLimit(t, db)
			ob, err := outbox.New(db, outbox.Config{Dialect: outbox.MySQL, Table: table, MaxPayloadBytes: limit,
				PurgeInterval: -1, Logger: discardLogger()})
			if err != nil {
				t.Fatal(err)
			}
			rec := newDeliveries(nil)
			if err := ob.Register("Blob", "Large", rec); err != nil {
				t.Fatal(err)
			}
			if err := ob.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ob.Stop(context.Background()) })
			// {"q":"\"\"…\"x"}: every byte of the escaped quotes is escaped again.
			body := strings.Repeat(`\"`, (limit-8)/2) + strings.Repeat("x", (limit-8)%2)
			payload := []byte(`{"q":"` + body + `"}`)
			if len(payload) != limit {
				t.Fatalf("payload of %d bytes, want %d", len(payload), limit)
			}
			headers := map[string]string{"trace": strings.Repeat(`'\"`, 1000)}
			tx, err := db.BeginTx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			id, err := ob.Writer().Write(t.Context(), tx, outbox.Envelope{Type: "Large", AggregateType: "Blob", Payload: payload,
				Headers: headers})
			if err != nil {
				_ = tx.Rollback()
				t.Fatalf("Write of %d bytes: %v", len(payload), err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatalf("Commit of %d bytes: %v", len(payload), err)
			}
			eventually(t, "delivery", func() bool { return rec.of(id) > 0 })
			for _, e := range rec.seen() {
				if e.ID == id && (!bytes.Equal(e.Payload, payload) || e.Headers["trace"] != headers["trace"]) {
					t.Errorf("delivered %d bytes, want %d equal ones", len(e.Payload), len(payload))
				}
			}
			var got outbox.Event
			eventually(t, "DONE", func() bool {
				got, err = ob.Store().Get(t.Context(), id)
				return err == nil && got.Status == outbox.StatusDone
			})
			if !bytes.Equal(got.Payload, payload) || got.Headers["trace"] != headers["trace"] {
				t.Errorf("read back %d bytes, want %d equal ones", len(got.Payload), len(payload))
			}
		})
	}
}
