package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// The minimal references (min, min2, mind) write the business transaction of ceilings a
// and b plus rows of a minimal outbox table, by hand, without the library: the write a
// user would make with no library at all. The table has a text primary key, a JSON
// payload, a status and a creation time, and no other index; it starts empty in every
// round (dropped and created again), and belongs to the bench alone (never the
// library's table).

const (
	// minTable is the minimal outbox table, in the run's schema.
	minTable = "bench_min_outbox"
	// minNew and minDone are the minimal table's statuses.
	minNew, minDone = 0, 1
	// mindBatch is how many NEW rows mind's deliverer reads at once (the library's
	// default poll batch).
	mindBatch = 100
	// mindIdle is how long mind's deliverer waits after a read that was not full, before
	// it reads again.
	mindIdle = 10 * time.Millisecond
)

// minTableName is the minimal table as SQL, qualified with the run's schema.
func (t *target) minTableName() string { return t.quoteIdent(t.qualify(minTable)) }

// minTableDDL creates the minimal table: jsonb on PostgreSQL, JSON on MariaDB/MySQL,
// TEXT on SQLite.
func minTableDDL(kind, table string) string {
	cols := map[string]string{
		"postgres": "id TEXT NOT NULL PRIMARY KEY, payload JSONB NOT NULL, status SMALLINT NOT NULL, created_at TIMESTAMPTZ NOT NULL",
		"mysql":    "id VARCHAR(64) NOT NULL PRIMARY KEY, payload JSON NOT NULL, status SMALLINT NOT NULL, created_at DATETIME(6) NOT NULL",
		"sqlite":   "id TEXT NOT NULL PRIMARY KEY, payload TEXT NOT NULL, status SMALLINT NOT NULL, created_at TEXT NOT NULL",
	}[kind]
	return "CREATE TABLE " + table + " (" + cols + ")"
}

// placeholder is the n-th (1-based) bind parameter of kind's driver.
func placeholder(kind string, n int) string {
	if kind == "postgres" {
		return "$" + strconv.Itoa(n)
	}
	return "?"
}

// minInsertSQL inserts rows NEW rows into the minimal table in one statement; each row
// takes three arguments: id, payload, created_at.
func minInsertSQL(kind, table string, rows int) string {
	var sb strings.Builder
	sb.WriteString("INSERT INTO " + table + " (id, payload, status, created_at) VALUES ")
	for r := range rows {
		if r > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "(%s, %s, %d, %s)", placeholder(kind, 3*r+1), placeholder(kind, 3*r+2), minNew, placeholder(kind, 3*r+3))
	}
	return sb.String()
}

// minSelectSQL reads the oldest NEW rows of the minimal table, at most limit.
func minSelectSQL(table string, limit int) string {
	return fmt.Sprintf("SELECT id, payload FROM %s WHERE status = %d ORDER BY created_at LIMIT %d", table, minNew, limit)
}

// minDoneSQL marks n rows DONE by ID, in one statement.
func minDoneSQL(kind, table string, n int) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "UPDATE %s SET status = %d WHERE id IN (", table, minDone)
	for i := range n {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(placeholder(kind, i+1))
	}
	sb.WriteString(")")
	return sb.String()
}

// createMinTable gives a minimal reference its table, empty.
func createMinTable(ctx context.Context, t *target) error {
	table := t.minTableName()
	if _, err := t.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+table); err != nil {
		return fmt.Errorf("drop %s: %w", table, err)
	}
	if _, err := t.db.ExecContext(ctx, minTableDDL(t.kind, table)); err != nil {
		return fmt.Errorf("create %s: %w", table, err)
	}
	return nil
}

// runMinimal is min (perTx 1), min2 (perTx o.w2Events) and, with deliver, mind: txs
// transactions of the business INSERT and one INSERT of perTx rows into the minimal
// table, on o.producers goroutines. Without deliver the clock stops when the last
// transaction committed; with it, when mind's deliverer has marked every row DONE.
func runMinimal(ctx context.Context, o options, t *target, txs, perTx int, deliver bool) (sample, error) {
	if err := createMinTable(ctx, t); err != nil {
		return sample{}, err
	}
	table := t.minTableName()
	defer dropAfter(t, "DROP TABLE IF EXISTS "+table)
	n := txs * perTx
	insertOrder := t.insertOrderSQL()
	insertEvents := minInsertSQL(t.kind, table, perTx)

	var d *minDeliverer
	if deliver {
		d = newMinDeliverer(t, n)
		go d.run(ctx)
	}
	start := time.Now()
	err := produce(ctx, o.producers, txs, func(ctx context.Context, i int) error {
		tx, err := t.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		id := "o-" + strconv.Itoa(i)
		now := time.Now()
		if _, err := tx.ExecContext(ctx, insertOrder, id, "customer-"+strconv.Itoa(i%100), int64(i), t.orderTime(now)); err != nil {
			_ = tx.Rollback()
			return err
		}
		args := make([]any, 0, 3*perTx)
		for j := range perTx {
			seq := i*perTx + j
			eventID, err := uuid.NewV7()
			if err != nil {
				_ = tx.Rollback()
				return err
			}
			payload, err := json.Marshal(o.payload(id, seq))
			if err != nil {
				_ = tx.Rollback()
				return err
			}
			args = append(args, eventID.String(), string(payload), t.orderTime(now))
		}
		if _, err := tx.ExecContext(ctx, insertEvents, args...); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	})
	if err != nil {
		if d != nil {
			d.stop()
		}
		return sample{}, err
	}
	written := time.Since(start)
	s := sample{events: n, txs: txs, writeSeconds: written.Seconds(), seconds: written.Seconds()}
	if d != nil {
		if err := d.wait(ctx); err != nil {
			return sample{}, err
		}
		s.seconds = time.Since(start).Seconds()
	}
	return s, nil
}

// minDeliverer is mind's delivery by hand: one goroutine reads NEW rows of the minimal
// table in batches, oldest first, hands each to a no-op in-process listener, and marks
// the batch DONE with one UPDATE … WHERE id IN (…), until n rows are DONE.
type minDeliverer struct {
	t         *target
	n         int
	delivered atomic.Int64
	cancel    chan struct{}
	done      chan error // receives the loop's end: nil once n rows are DONE
}

func newMinDeliverer(t *target, n int) *minDeliverer {
	return &minDeliverer{t: t, n: n, cancel: make(chan struct{}), done: make(chan error, 1)}
}

// listen is the in-process listener: it does nothing with the event.
func (*minDeliverer) listen(string, []byte) {}

func (d *minDeliverer) run(ctx context.Context) {
	d.done <- d.loop(ctx)
}

func (d *minDeliverer) loop(ctx context.Context) error {
	table := d.t.minTableName()
	sel := minSelectSQL(table, mindBatch)
	ids := make([]any, 0, mindBatch)
	for d.delivered.Load() < int64(d.n) {
		ids = ids[:0]
		rows, err := d.t.db.QueryContext(ctx, sel)
		if err != nil {
			return fmt.Errorf("read NEW rows: %w", err)
		}
		for rows.Next() {
			var id string
			var payload []byte
			if err := rows.Scan(&id, &payload); err != nil {
				rows.Close()
				return fmt.Errorf("read NEW rows: %w", err)
			}
			d.listen(id, payload)
			ids = append(ids, id)
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("read NEW rows: %w", err)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read NEW rows: %w", err)
		}
		if len(ids) > 0 {
			if _, err := d.t.db.ExecContext(ctx, minDoneSQL(d.t.kind, table, len(ids)), ids...); err != nil {
				return fmt.Errorf("mark DONE: %w", err)
			}
			d.delivered.Add(int64(len(ids)))
		}
		if len(ids) < mindBatch && d.delivered.Load() < int64(d.n) {
			select {
			case <-time.After(mindIdle):
			case <-d.cancel:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

// stop ends the loop early and waits for it.
func (d *minDeliverer) stop() {
	close(d.cancel)
	<-d.done
}

// wait waits until the deliverer has marked every row DONE.
func (d *minDeliverer) wait(ctx context.Context) error {
	select {
	case err := <-d.done:
		if err != nil {
			return fmt.Errorf("deliver: %d of %d DONE: %w", d.delivered.Load(), d.n, err)
		}
		return nil
	case <-ctx.Done():
		close(d.cancel)
		<-d.done
		return fmt.Errorf("waiting for deliveries: %d of %d DONE: %w", d.delivered.Load(), d.n, ctx.Err())
	}
}
