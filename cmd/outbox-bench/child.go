package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

// childOutbox is the outbox settings the parent hands a child process (w1m, sustain):
// the command line's, so that a child runs the outbox as the parent's workloads do.
type childOutbox struct {
	Workers      int           `json:"workers"`
	HotQueue     int           `json:"hot_queue"`
	ColdQueue    int           `json:"cold_queue"`
	PollInterval time.Duration `json:"poll_interval"`
	PollBatch    int           `json:"poll_batch"`
	DoneWindow   time.Duration `json:"done_window"`
	PayloadSize  int           `json:"payload_size"`
	Verbose      bool          `json:"verbose"`
}

func (o options) childOutbox() childOutbox {
	return childOutbox{Workers: o.workers, HotQueue: o.hotQueue, ColdQueue: o.coldQueue, PollInterval: o.pollInterval,
		PollBatch: o.pollBatch, DoneWindow: o.doneWindow, PayloadSize: o.payloadSize, Verbose: o.verbose}
}

// options returns the options the child's outbox configuration and payloads come from.
func (c childOutbox) options() options {
	return options{workers: c.Workers, hotQueue: c.HotQueue, coldQueue: c.ColdQueue, pollInterval: c.PollInterval,
		pollBatch: c.PollBatch, doneWindow: c.DoneWindow, payloadSize: c.PayloadSize, verbose: c.Verbose}
}

// childErr is the error that ended a child process, in its one JSON result line
// (childMain writes it, runChild reads it).
type childErr struct {
	Error string `json:"error,omitempty"`
}

func (e *childErr) childError() *childErr { return e }

// childResult is a child process's result: a struct embedding childErr.
type childResult interface{ childError() *childErr }

// runChild runs this program as the child process role, with params as its one JSON
// argument, and decodes the JSON line the child prints into res. It returns the child's
// process state, or an error when the child reported one, printed no result or failed.
func runChild(ctx context.Context, role string, params any, res childResult) (*os.ProcessState, error) {
	arg, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var stdout bytes.Buffer
	cmd := exec.CommandContext(ctx, exe, role, string(arg))
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	cmd.WaitDelay = 10 * time.Second
	runErr := cmd.Run()
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), res); err != nil {
		return nil, fmt.Errorf("child: %v; output %q: %w", runErr, stdout.String(), err)
	}
	if e := res.childError().Error; e != "" {
		return nil, fmt.Errorf("child: %s", e)
	}
	if runErr != nil {
		return nil, fmt.Errorf("child: %w", runErr)
	}
	return cmd.ProcessState, nil
}

// childMain is a child process's main: it runs body, prints res as one JSON line with
// body's error in it, and returns the exit code.
func childMain(res childResult, body func() error) int {
	err := body()
	if err != nil {
		res.childError().Error = err.Error()
	}
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
	if err != nil {
		return 1
	}
	return 0
}

// childTarget connects a child process to the parent's database and schema with a pool
// of its own. The child closes t.db and nothing else: the schema belongs to the parent.
func childTarget(ctx context.Context, kind, dsn, schema string, pool int) (*target, error) {
	t := &target{kind: kind, schema: schema, dsn: dsn, pool: pool}
	switch kind {
	case "sqlite":
		t.driver, t.dialect = "sqlite", outbox.SQLite
	case "postgres":
		t.driver, t.dialect = "pgx", outbox.Postgres
	case "mysql":
		t.driver, t.dialect = "mysql", outbox.MySQL
	default:
		return nil, fmt.Errorf("unknown database %q", kind)
	}
	db, err := openPool(ctx, t.driver, t.dsn, t.pool)
	if err != nil {
		return nil, err
	}
	t.db = db
	return t, nil
}

// warmPool opens n connections of db and returns them to the pool (idle = open = n), so
// that a child's measured phase does not open connections the parent's pool has open
// already from the workloads before.
func warmPool(ctx context.Context, db *sql.DB, n int) error {
	conns := make([]*sql.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		c, err := db.Conn(ctx)
		if err != nil {
			return err
		}
		conns = append(conns, c)
	}
	return nil
}

// writeOne runs business transaction seq: one business INSERT and one event whose
// AggregateID is seq, as w1 writes them.
func writeOne(ctx context.Context, o options, t *target, insert string, w *outbox.Writer, seq int) error {
	return outbox.RunInTx(ctx, t.db, func(ctx context.Context, tx *outbox.Tx) error {
		id := "o-" + strconv.Itoa(seq)
		if _, err := tx.ExecContext(ctx, insert, id, "customer-"+strconv.Itoa(seq%100), int64(seq), t.orderTime(time.Now())); err != nil {
			return err
		}
		_, err := w.Write(ctx, tx, outbox.Envelope{Type: eventType, AggregateType: aggregateType,
			AggregateID: strconv.Itoa(seq), Payload: o.payload(id, seq)})
		return err
	})
}

// lineWriter writes whole lines to stdout from several goroutines.
type lineWriter struct{ mu sync.Mutex }

func (w *lineWriter) println(args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fmt.Fprintln(os.Stdout, args...)
}

// waitDoneRows waits until the table holds n DONE rows, checking every interval.
func waitDoneRows(ctx context.Context, t *target, n int64, interval time.Duration) error {
	for {
		got, err := t.countDone(ctx)
		if err != nil {
			return fmt.Errorf("count DONE rows: %w", err)
		}
		if got >= n {
			return nil
		}
		select {
		case <-time.After(interval):
		case <-ctx.Done():
			return fmt.Errorf("waiting for DONE rows: %d of %d: %w", got, n, ctx.Err())
		}
	}
}
