package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

// Recorder records a listener's attempts in a [Log] under a node name.
type Recorder struct {
	Log  *Log
	Node string
}

// Wrap returns a listener that appends Started, calls l, then appends Delivered before
// returning nil, or Failed before returning an error or re-panicking. A failed Append
// of Started or Delivered fails the attempt (the event is retried), so a delivery the
// dispatcher counts as done is always on disk.
func (r Recorder) Wrap(l outbox.Listener) outbox.Listener {
	return outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) (err error) {
		if err := r.Log.Append(Record{Kind: Started, Event: e.ID, Node: r.Node}); err != nil {
			return fmt.Errorf("chaos: record start: %w", err)
		}
		ended := false
		defer func() {
			if !ended {
				// A panic: record the end of the attempt and let it propagate.
				_ = r.Log.Append(Record{Kind: Failed, Event: e.ID, Node: r.Node})
			}
		}()
		err = l.Handle(ctx, e)
		if err == nil {
			err = r.Log.Append(Record{Kind: Delivered, Event: e.ID, Node: r.Node})
			if err != nil {
				err = fmt.Errorf("chaos: record delivery: %w", err)
			}
		}
		if err != nil {
			_ = r.Log.Append(Record{Kind: Failed, Event: e.ID, Node: r.Node})
		}
		ended = true
		return err
	})
}

// Listener is Wrap of a listener that succeeds at once.
func (r Recorder) Listener() outbox.Listener {
	return r.Wrap(outbox.ListenerFunc(func(context.Context, *outbox.Event) error { return nil }))
}

// ReadFinals reads every row's event ID, status, attempts and order key and seq from table. It retries
// for up to a minute while the database is unreachable (after a restart).
func ReadFinals(ctx context.Context, db *sql.DB, table string) ([]Final, error) {
	if _, err := outbox.NewSQLStore(db, outbox.SQLite, outbox.SQLStoreConfig{Table: table}); err != nil {
		return nil, err // the name is not a valid table name (NewSQLStore does no I/O)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		finals, err := readFinals(ctx, db, table)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return finals, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func readFinals(ctx context.Context, db *sql.DB, table string) ([]Final, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, "SELECT event_id, status, attempts, order_key, order_seq FROM "+table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	finals := []Final{}
	for rows.Next() {
		var f Final
		var key sql.NullString
		var seq sql.NullInt64
		if err := rows.Scan(&f.Event, &f.Status, &f.Attempts, &key, &seq); err != nil {
			return nil, err
		}
		f.OrderKey, f.OrderSeq = key.String, seq.Int64
		finals = append(finals, f)
	}
	return finals, rows.Err()
}
