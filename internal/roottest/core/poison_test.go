package outbox_test

// One row must never stop the delivery of the others: a row that the database stores
// but cannot return, or that the library cannot decode, is isolated and moved to DEAD
// with a reason naming the problem, while the rows around it are delivered.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

// poisonPayload is stored by PostgreSQL as 2.5 KB of jsonb and written out as more
// than a gigabyte: every statement that returns it fails with "out of memory".
var poisonPayload = "[" + strings.Repeat("1e131071,", 8999) + "1e131071]"

// poisonRow is one way to store a row that cannot be delivered.
type poisonRow struct {
	name string
	// spoil turns the stored row id into a bad one, inside the writing transaction.
	spoil func(ctx context.Context, tx *sql.Tx, b backend, table, id string) error
	// reason is what the DEAD row's last_error must hold.
	reason string
	// unreadable: the database cannot return the row (ErrUnreadableRow).
	unreadable bool
}

func poisonRows(b backend) []poisonRow {
	ph := func(n int) string {
		if b.dialect == outbox.Postgres {
			return fmt.Sprintf("$%d", n)
		}
		return "?"
	}
	rows := []poisonRow{{
		name: "headers not an object of strings",
		spoil: func(ctx context.Context, tx *sql.Tx, b backend, table, id string) error {
			_, err := tx.ExecContext(ctx, `UPDATE `+table+` SET headers = `+jsonArg(b, ph(1))+` WHERE event_id = `+ph(2), `["x"]`, id)
			return err
		},
		reason: "headers",
	}}
	if b.dialect == outbox.Postgres {
		rows = append(rows, poisonRow{
			name: "payload PostgreSQL cannot write out",
			spoil: func(ctx context.Context, tx *sql.Tx, b backend, table, id string) error {
				_, err := tx.ExecContext(ctx, `UPDATE `+table+` SET payload = CAST($1 AS JSONB) WHERE event_id = $2`, poisonPayload, id)
				return err
			},
			reason:     "out of memory",
			unreadable: true,
		})
	}
	return rows
}

// jsonArg casts a placeholder to the payload and headers columns' type.
func jsonArg(b backend, ph string) string {
	if b.dialect == outbox.Postgres {
		return "CAST(" + ph + " AS JSONB)"
	}
	return ph
}

// TestPoisonRowsDoNotStopDelivery writes, in one transaction with five ordinary
// events, rows that cannot be delivered, in SingleNode and in MultiNode mode on every
// database. The ordinary events are delivered; each bad row is moved to DEAD with a
// reason that names what is wrong, an ERROR log names its ID, and Get and ListDead show
// it (a row the database cannot return with a placeholder payload) instead of failing.
func TestPoisonRowsDoNotStopDelivery(t *testing.T) {
	t.Parallel()
	for _, mode := range []outbox.Mode{outbox.SingleNode, outbox.MultiNode} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			forEachBackend(t, func(t *testing.T, b backend) {
				logs := newLogSink()
				// PostgreSQL writes the unreadable payload out to its 1 GB limit before it
				// fails the read, which takes it seconds, more on a loaded machine. Each
				// statement is bounded by QueryTimeout, set long enough for that failure to
				// come first (a read that times out alone is left for the next cycle, never
				// DEAD); a poll cycle that meets the row runs at most three statements that
				// long (the batch, the batch without payloads, the row alone), so every wait
				// below is bounded by a multiple of it.
				const queryTimeout = time.Minute
				wait := 4 * queryTimeout
				cfg := outbox.Config{Mode: mode, PollInterval: 20 * time.Millisecond, SkipRecent: -1, PurgeInterval: -1,
					QueryTimeout: queryTimeout, Logger: logs.logger()}
				if mode == outbox.MultiNode {
					cfg.ClaimTTL, cfg.NodeID = time.Minute, "node-a"
				}
				a := setupOutbox(t, b, cfg)
				t.Cleanup(func() {
					if t.Failed() {
						for _, r := range append(logs.atLevel(slog.LevelWarn), logs.atLevel(slog.LevelError)...) {
							t.Logf("%s %s %.300v", r.level, r.msg, r.attrs)
						}
					}
				})
				rec := newDeliveries(nil)
				if err := a.ob.Register("Order", "OrderPlaced", rec); err != nil {
					t.Fatal(err)
				}
				ctx := t.Context()
				bad := poisonRows(b)
				// A plain *sql.Tx: no after-commit hook, so every event goes through the
				// poller, which reads the rows as stored.
				tx, err := a.db.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				var good []string
				badIDs := map[string]poisonRow{}
				for i := range 5 + len(bad) {
					id, err := a.ob.Writer().Write(ctx, tx, orderPlaced)
					if err != nil {
						t.Fatal(err)
					}
					if j := i - 2; j >= 0 && j < len(bad) { // among the good ones, not first
						if err := bad[j].spoil(ctx, tx, b, a.table, id); err != nil {
							t.Fatalf("%s: %v", bad[j].name, err)
						}
						badIDs[id] = bad[j]
						continue
					}
					good = append(good, id)
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
				// Before the poller moves them: the admin's list of pending events shows
				// every row, a row the database cannot return with a placeholder payload.
				page, err := a.ob.Events().List(ctx, outbox.EventQuery{Status: outbox.StatusNew, Limit: 50})
				if err != nil {
					t.Fatalf("list pending events = %v", err)
				}
				if len(page.Events) != len(good)+len(badIDs) {
					t.Errorf("the pending list shows %d events, want %d", len(page.Events), len(good)+len(badIDs))
				}
				for _, e := range page.Events {
					if p, ok := badIDs[e.ID]; ok && p.unreadable && !strings.Contains(string(e.Payload), p.reason) {
						t.Errorf("%s: listed with payload %.200q, want a placeholder naming %q", p.name, e.Payload, p.reason)
					}
				}
				a.start(t)
				for _, id := range good {
					eventuallyWithin(t, wait, "delivery of "+id, func() bool { return rec.of(id) == 1 })
				}
				for id, p := range badIDs {
					// The status alone: a read of the whole row that PostgreSQL cannot write out
					// takes it seconds to fail.
					eventuallyWithin(t, wait, p.name+" moved to DEAD", func() bool {
						var status outbox.Status
						err := a.db.QueryRowContext(ctx, `SELECT status FROM `+a.table+` WHERE event_id = `+ph1(b.dialect), id).Scan(&status)
						if err != nil {
							t.Fatalf("%s: read status: %v", p.name, err)
						}
						return status == outbox.StatusDead
					})
					e, err := a.ob.Store().Get(ctx, id)
					if err != nil || e.Status != outbox.StatusDead {
						t.Fatalf("%s: Get = %+v, %v", p.name, e.Status, err)
					}
					if !strings.Contains(e.LastError, p.reason) {
						t.Errorf("%s: reason %q does not name %q", p.name, e.LastError, p.reason)
					}
					if p.unreadable {
						if !strings.Contains(e.LastError, outbox.ErrUnreadableRow.Error()) || !strings.Contains(e.LastError, "bytes as stored") {
							t.Errorf("%s: reason %q does not say the row cannot be read, with its size", p.name, e.LastError)
						}
						var shown string
						if err := json.Unmarshal(e.Payload, &shown); err != nil || !strings.Contains(shown, p.reason) {
							t.Errorf("%s: Get shows payload %.200q, want a placeholder naming %q", p.name, e.Payload, p.reason)
						}
					}
					if rec.of(id) != 0 {
						t.Errorf("%s: delivered", p.name)
					}
					if !logNames(logs, slog.LevelError, id) {
						t.Errorf("%s: no ERROR log names %s", p.name, id)
					}
				}
				dead, err := a.ob.Events().ListDead(ctx, outbox.DeadQuery{Limit: 10})
				if err != nil {
					t.Fatalf("List dead = %v", err)
				}
				if len(dead.Events) != len(badIDs) {
					t.Errorf("List dead shows %d events, want %d", len(dead.Events), len(badIDs))
				}
			})
		})
	}
}

// logNames reports whether a record at level has an attribute whose value is text.
func logNames(h *logSink, level slog.Level, text string) bool {
	for _, r := range h.atLevel(level) {
		for _, v := range r.attrs {
			if v == text {
				return true
			}
		}
	}
	return false
}
