package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/internal/testdb"
)

// TestWriterRefusalsKeepTheTransaction writes, between two business rows of one
// transaction, envelopes that no database could take whole: a 20 MB header value, a
// payload whose numbers PostgreSQL would write out as gigabytes, and times outside
// what MySQL stores. Each is refused with a typed error before any SQL, and the
// transaction goes on to commit both business rows and the one valid event.
func TestWriterRefusalsKeepTheTransaction(t *testing.T) {
	t.Parallel()
	huge := json.RawMessage("[" + strings.Repeat("1e131071,", 8999) + "1e131071]") // 81 KB
	refused := []struct {
		name string
		env  outbox.Envelope
		want error
	}{
		{"20 MB header", outbox.Envelope{Type: "T", Payload: 1, Headers: map[string]string{"k": strings.Repeat("h", 20<<20)}}, outbox.ErrHeadersTooLarge},
		{"expanding numbers", outbox.Envelope{Type: "T", Payload: huge}, outbox.ErrPayloadTooLarge},
		{"year 10000", outbox.Envelope{Type: "T", Payload: 1, DeliverAfter: 1, OccurredAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, outbox.ErrInvalidTime},
	}
	forEachBackend(t, func(t *testing.T, b backend) {
		a := setupOutbox(t, b, outbox.Config{Mode: outbox.WriterOnly, PurgeInterval: -1})
		ctx := t.Context()
		var valid string
		err := outbox.RunInTx(ctx, a.db, func(ctx context.Context, tx *outbox.Tx) error {
			for i, r := range refused {
				if _, err := tx.ExecContext(ctx, `INSERT INTO `+a.orders+` (id) VALUES (`+ph1(b.dialect)+`)`, "o-"+strconv.Itoa(i)); err != nil {
					return fmt.Errorf("business row before %s: %w", r.name, err)
				}
				_, err := a.ob.Writer().Write(ctx, tx, r.env)
				if !errors.Is(err, r.want) || !errors.Is(err, outbox.ErrInvalidEnvelope) {
					return fmt.Errorf("%s: Write = %v, want %v", r.name, err, r.want)
				}
			}
			var err error
			valid, err = a.ob.Writer().Write(ctx, tx, orderPlaced)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if n := a.count(t, a.orders); n != len(refused) {
			t.Errorf("%d business rows committed, want %d", n, len(refused))
		}
		if n := a.count(t, a.table); n != 1 {
			t.Errorf("%d events stored, want 1", n)
		}
		a.event(t, valid)
	})
}

// TestMySQLWriterChecksThePacketWithoutStart writes, from a writer that never called
// Start and whose MaxPayloadBytes is above what the server takes, an event larger than
// max_allowed_packet allows: it is refused with ErrEventTooLarge naming the setting,
// before any SQL, and the transaction commits its business rows. Then a batch whose
// rows together are larger than max_allowed_packet is written in several statements,
// with and without the driver's client-side interpolation.
func TestMySQLWriterChecksThePacketWithoutStart(t *testing.T) {
	t.Parallel()
	for _, interpolate := range []bool{false, true} {
		t.Run("interpolateParams="+strconv.FormatBool(interpolate), func(t *testing.T) {
			t.Parallel()
			db := openMySQL(t, func(cfg *mysql.Config) { cfg.InterpolateParams = interpolate })
			table := testdb.IsolatedTable(t, db, outbox.MySQL.Name())
			ctx := t.Context()
			if err := outbox.MigrateTable(ctx, db, outbox.MySQL, table); err != nil {
				t.Fatal(err)
			}
			orders := strings.TrimSuffix(table, outbox.DefaultTable) + "orders"
			if _, err := db.ExecContext(ctx, `CREATE TABLE `+orders+` (id VARCHAR(64) PRIMARY KEY)`); err != nil {
				t.Fatal(err)
			}
			maxPacket, limit := mysqlPayloadLimit(t, db)
			// Start would refuse this MaxPayloadBytes; a writer-only process never calls it.
			ob, err := outbox.New(db, outbox.Config{Mode: outbox.WriterOnly, Dialect: outbox.MySQL, Table: table,
				MaxPayloadBytes: int(maxPacket) * 2, Logger: discardLogger()})
			if err != nil {
				t.Fatal(err)
			}
			w := ob.Writer()
			blob := func(n int) json.RawMessage { return json.RawMessage(`"` + strings.Repeat("b", n-2) + `"`) }

			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			if _, err := tx.ExecContext(ctx, `INSERT INTO `+orders+` (id) VALUES ('before')`); err != nil {
				t.Fatal(err)
			}
			_, err = w.Write(ctx, tx, outbox.Envelope{Type: "Large", Payload: blob(limit + 1)})
			if !errors.Is(err, outbox.ErrEventTooLarge) || !strings.Contains(err.Error(), "max_allowed_packet is "+strconv.FormatInt(maxPacket, 10)) {
				t.Fatalf("Write of %d bytes (max_allowed_packet %d) = %v, want ErrEventTooLarge naming the setting", limit+1, maxPacket, err)
			}
			t.Log(err)
			if _, err := tx.ExecContext(ctx, `INSERT INTO `+orders+` (id) VALUES ('after')`); err != nil {
				t.Fatalf("the transaction is not usable after the refusal: %v", err)
			}
			// Rows of a third of the packet each: one multi-row INSERT of them all would be
			// twice max_allowed_packet.
			var envs []outbox.Envelope
			for range 6 {
				envs = append(envs, outbox.Envelope{Type: "Large", Payload: blob(int(maxPacket / 3))})
			}
			ids, err := w.WriteAll(ctx, tx, envs)
			if err != nil {
				t.Fatalf("WriteAll of %d events of %d bytes (max_allowed_packet %d) = %v", len(envs), maxPacket/3, maxPacket, err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			var orderRows, events int
			if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+orders).Scan(&orderRows); err != nil {
				t.Fatal(err)
			}
			if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+table).Scan(&events); err != nil {
				t.Fatal(err)
			}
			if orderRows != 2 || events != len(ids) {
				t.Errorf("committed %d business rows and %d events, want 2 and %d", orderRows, events, len(ids))
			}
		})
	}
}
