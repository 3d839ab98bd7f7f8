package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"

	"github.com/outboxkit/outbox/core/outboxtype"
)

// One row must never stop the delivery of the others. A row can be stored and yet be
// impossible to read back: PostgreSQL stores a jsonb number such as 1e131071 in a few
// bytes but writes it out in full, so a payload of a few kilobytes renders as gigabytes
// and every statement that returns the row fails with "out of memory". A batch read
// (the poller's, a claim, a promote, an admin list or Get) that fails in a way one row
// can cause is therefore run again with the stored sizes of the payload and headers in
// their place, which renders no payload, and then each row alone: a row that fails
// alone, while the server returns it without its payload, is unreadable. The poller
// moves such a row to DEAD with a reason wrapping [ErrUnreadableRow] that names the
// server's error and the sizes; inspection reads show it with a placeholder payload.
//
// The other databases have no such row. MySQL/MariaDB return every stored value as it
// is (a LONGTEXT larger than max_allowed_packet too). SQLite returns what it stores;
// only a damaged file fails a read, and SQLite keeps the columns after the payload
// behind it in the record, so the poll's own WHERE meets the damage and no read can
// step around it (nor can an UPDATE or DELETE of the row): that is a file to repair
// (docs/databases.md). A row that the library cannot decode is a [RowError] on every
// database, handled the same way.

// rowFault reports whether err, from a statement that returned rows, may be the fault
// of one of the rows: not a cancelled or expired context and not a lost connection.
func rowFault(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		// The statement's own QueryTimeout (the caller's context is live): a row that
		// takes the server that long to write out (PostgreSQL builds a gigabyte before
		// it fails) times the batch out. Isolation reads the others; a row that times
		// out alone is left for the next cycle, never moved to DEAD (errRowTimeout).
		return true
	}
	if st := sqlState(err); st != "" {
		// Only an error of the data itself can be one row's fault: a data exception (class
		// 22), a program limit (54: a value that writes out past PostgreSQL's 1 GB) or an
		// internal error (XX: "invalid memory alloc request size"). A connection, shutdown,
		// resource, lock or transaction error (08, 57, 53, 55, 40, ...) is the server's
		// state, whichever row the statement met: a restart's "terminating connection due to
		// administrator command" (57P01) on a row's own read must not make it unreadable.
		switch st[:2] {
		case "22", "54", "XX":
			return true
		}
		return false
	}
	var ne net.Error
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) &&
		!errors.Is(err, driver.ErrBadConn) && !errors.Is(err, sql.ErrConnDone) && !errors.Is(err, sql.ErrTxDone) &&
		!errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.As(err, &ne)
}

// sizedSQL returns q's SQL with the first event column list's payload and headers
// replaced by their stored sizes in bytes, or false when q holds no such list.
func (d *dialect) sizedSQL(sqlText string) (string, bool) {
	for _, prefix := range [...]string{"", "t."} {
		cols := prefix + "payload, " + prefix + "headers"
		if i := strings.Index(sqlText, cols); i >= 0 {
			sized := d.sizeFunc + "(" + prefix + "payload), " + d.sizeFunc + "(" + prefix + "headers)"
			return sqlText[:i] + sized + sqlText[i+len(cols):], true
		}
	}
	return "", false
}

// isolated is what isolate made of one row of a failed batch read.
type isolated struct {
	event outboxtype.Event
	err   error // the row's own error: undecodable, or unreadable (ErrUnreadableRow)
}

// isolate reads again, row by row, the rows of q, a statement of selectColumns that
// failed with cause. It runs q with the payload and headers replaced by their stored
// sizes (sizedSQL), then reads each of those rows alone by ID, in q's order. It returns cause itself when cause
// cannot be a row's fault or q has no event column list, and a joined error when the
// server fails the reads that return no payload too. Use it only for a statement that
// may run again: a SELECT, or one UPDATE … RETURNING whose failure undid it whole.
func (s *Store) isolate(ctx context.Context, exec outboxtype.Executor, q query, cause error, mode decodeMode) ([]isolated, error) {
	if !rowFault(ctx, cause) {
		return nil, cause
	}
	found, err := s.readSized(ctx, exec, q)
	if err != nil {
		return nil, errors.Join(cause, err)
	}
	out := make([]isolated, 0, len(found))
	for _, sr := range found {
		if sr.decodeErr != nil {
			out = append(out, isolated{event: sr.event, err: sr.decodeErr})
			continue
		}
		var (
			e                outboxtype.Event
			rerr, unreadable error
		)
		if len(found) == 1 {
			// The statement's only row failed it: reading the row again would only
			// fail again (a PostgreSQL payload that writes out to a gigabyte takes
			// seconds each time).
			unreadable = cause
		} else {
			e, rerr, unreadable, err = s.readAlone(ctx, exec, sr.event.ID, mode)
		}
		switch {
		case errors.Is(err, errRowTimeout):
			continue // read again by the next cycle; the rows around it go on
		case err != nil:
			return nil, errors.Join(cause, err)
		case errors.Is(rerr, outboxtype.ErrNotFound): // finished and purged since: nothing to read
			continue
		case unreadable != nil:
			rerr = fmt.Errorf("%w (payload %d bytes, headers %d bytes as stored): %w", outboxtype.ErrUnreadableRow, sr.payload, sr.headers, unreadable)
			if mode == lenient {
				e = sr.event
				e.Payload = unreadablePayload(rerr)
				rerr = nil
			}
		case rerr == nil:
			// A claim's statement returned the previous claim in locked_by (PostgreSQL);
			// keep what it returned.
			e.LockedBy = sr.event.LockedBy
		}
		if rerr != nil {
			e.ID = sr.event.ID
		}
		out = append(out, isolated{event: e, err: rerr})
	}
	return out, nil
}

// sizedRow is one row of a failed statement read without its payload: the event's
// other columns and the stored sizes.
type sizedRow struct {
	event            outboxtype.Event
	payload, headers int64
	decodeErr        error
}

// readSized runs q with its payload and headers replaced by their stored sizes.
func (s *Store) readSized(ctx context.Context, exec outboxtype.Executor, q query) ([]sizedRow, error) {
	sized, ok := s.d.sizedSQL(q.SQL)
	if !ok {
		return nil, errors.New("the statement returns no event columns to read apart")
	}
	var found []sizedRow
	sctx, cancel := s.withTimeout(ctx)
	defer cancel()
	err := eachRow(sctx, exec, sized, q.Args, func(rows *sql.Rows) error {
		var r rawRow
		if err := r.scan(rows); err != nil {
			return err
		}
		sr := sizedRow{}
		sr.event, sr.payload, sr.headers, sr.decodeErr = r.decodeSized(s.d)
		sr.event.ID = r.id()
		found = append(found, sr)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the rows without their payloads: %w", err)
	}
	return found, nil
}

// eachRow runs a statement and calls fn for each row, closing the rows before it
// returns.
func eachRow(ctx context.Context, exec outboxtype.Executor, sqlText string, args []any, fn func(*sql.Rows) error) error {
	rows, err := exec.QueryContext(ctx, sqlText, args...)
	if err != nil {
		return err
	}
	for rows.Next() {
		if err := fn(rows); err != nil {
			rows.Close()
			return err
		}
	}
	return errors.Join(rows.Err(), rows.Close())
}

// readAlone reads the row id by itself. rowErr is the row's own problem: it does not
// decode, or it is gone (ErrNotFound). unreadable is the server's error when it cannot
// return the row while it returns the row without its payload. err is any other
// failure, which ends the isolation.
func (s *Store) readAlone(ctx context.Context, exec outboxtype.Executor, id string, mode decodeMode) (e outboxtype.Event, rowErr, unreadable, err error) {
	q := s.d.getQuery(s.table, id)
	var r rawRow
	rctx, cancel := s.withTimeout(ctx)
	rerr := scanOne(rctx, exec, q.SQL, q.Args, &r)
	timedOut := rerr != nil && rctx.Err() != nil && ctx.Err() == nil
	cancel()
	if timedOut { // slow, not proven unreadable: skipped this time, never DEAD for it
		return outboxtype.Event{}, nil, nil, fmt.Errorf("read event %s: %w: %w", id, errRowTimeout, rerr)
	}
	switch {
	case rerr == nil:
		e, derr := r.decode(s.d, mode)
		return e, derr, nil, nil
	case errors.Is(rerr, outboxtype.ErrNotFound):
		return outboxtype.Event{}, rerr, nil, nil
	case !rowFault(ctx, rerr):
		return outboxtype.Event{}, nil, nil, fmt.Errorf("read event %s: %w", id, rerr)
	}
	// The row alone failed. If the server returns it without its payload, the row is
	// the fault.
	sized, _ := s.d.sizedSQL(q.SQL)
	var probe rawRow
	pctx, cancel := s.withTimeout(ctx)
	defer cancel()
	if perr := scanOne(pctx, exec, sized, q.Args, &probe); perr != nil {
		return outboxtype.Event{}, nil, nil, fmt.Errorf("read event %s: %w; without its payload: %w", id, rerr, perr)
	}
	return outboxtype.Event{}, nil, rerr, nil
}

// errRowTimeout marks a row whose read alone ran past QueryTimeout: isolate leaves it
// for the next cycle instead of ending the isolation or calling it unreadable.
var errRowTimeout = errors.New("its read ran past QueryTimeout")

// scanOne runs a statement that returns at most one row of selectColumns into r. It
// reads through rows, not QueryRow, so that an error the server sends with the row is
// reported as such.
func scanOne(ctx context.Context, exec outboxtype.Executor, sqlText string, args []any, r *rawRow) error {
	rows, err := exec.QueryContext(ctx, sqlText, args...)
	if err != nil {
		return err
	}
	if !rows.Next() {
		err = rows.Err()
		if err == nil {
			err = outboxtype.ErrNotFound
		}
		rows.Close()
		return err
	}
	if err := r.scan(rows); err != nil {
		rows.Close()
		return err
	}
	return errors.Join(rows.Err(), rows.Close())
}

// decodeSized decodes a row of a sized statement (sizedSQL): the payload and headers
// columns hold their stored sizes (NULL headers: none). The event's Payload is nil.
func (r *rawRow) decodeSized(d *dialect) (e outboxtype.Event, payload, headers int64, err error) {
	if r[5] != nil {
		payload, _ = intValue(r[5])
	}
	if r[6] != nil {
		headers, _ = intValue(r[6])
	}
	r[5], r[6] = "null", nil
	e, err = r.decode(d, lenient)
	e.Payload = nil
	return e, payload, headers, err
}

// unreadablePayload is what an inspection read shows in place of a payload that the
// database cannot return: a JSON string that says so.
func unreadablePayload(err error) json.RawMessage {
	b, _ := json.Marshal("outbox: " + err.Error())
	return b
}

// splitIsolated sorts isolate's rows into events and row errors, for the poller's reads.
func splitIsolated(rows []isolated) (events []outboxtype.Event, bad []outboxtype.RowError) {
	for _, r := range rows {
		if r.err != nil {
			bad = append(bad, outboxtype.RowError{EventID: r.event.ID, Err: r.err})
			continue
		}
		events = append(events, r.event)
	}
	return events, bad
}

// sqlState returns the SQLSTATE of err when the driver reports one, else "": pgx's and
// lib/pq's errors have a SQLState method, and pgx ("(SQLSTATE 57P01)") and
// go-sql-driver/mysql ("Error 1053 (08S01): ...") write it into the message.
func sqlState(err error) string {
	var s interface{ SQLState() string }
	if errors.As(err, &s) {
		if st := s.SQLState(); len(st) == 5 {
			return st
		}
	}
	if m := sqlStateRE.FindStringSubmatch(err.Error()); m != nil {
		return m[1] + m[2]
	}
	return ""
}

var sqlStateRE = regexp.MustCompile(`\(SQLSTATE ([0-9A-Z]{5})\)|Error \d+ \(([0-9A-Z]{5})\)`)
