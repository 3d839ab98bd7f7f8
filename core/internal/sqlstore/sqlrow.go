package sqlstore

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/outboxkit/outbox/core/outboxtype"
)

// rawRow holds one row of selectColumns as the driver returned it. Scanning into `any`
// never fails, so a corrupt value is found while decoding, row by row.
type rawRow [19]any

// lockedByColumn is locked_by's index in selectColumns and a rawRow.
const lockedByColumn = 13

// scan reads one row of selectColumns, followed by extra columns into extra.
func (r *rawRow) scan(s interface{ Scan(dest ...any) error }, extra ...any) error {
	dest := make([]any, len(r), len(r)+len(extra))
	for i := range r {
		dest[i] = &r[i]
	}
	return s.Scan(append(dest, extra...)...)
}

// id returns the event ID for error reports, whatever else is wrong with the row.
func (r *rawRow) id() string {
	s, _ := textValue(r[0])
	return s
}

// decodeMode selects how a row with an undecodable payload or headers is handled.
type decodeMode int

const (
	// strict rejects the row: it cannot be delivered.
	strict decodeMode = iota
	// lenient keeps the row for inspection: an invalid payload becomes a JSON string
	// holding the stored text and undecodable headers become nil.
	lenient
)

// decode turns a raw row into an Event. Every error names the column.
func (r *rawRow) decode(d *dialect, mode decodeMode) (outboxtype.Event, error) {
	var e outboxtype.Event
	var err error
	text := func(i int, name string, dst *string, nullable bool) {
		if err != nil {
			return
		}
		if r[i] == nil && nullable {
			return
		}
		if *dst, err = textValue(r[i]); err != nil {
			err = fmt.Errorf("%s: %w", name, err)
		}
	}
	text(0, "event_id", &e.ID, false)
	text(1, "event_type", &e.Type, false)
	text(2, "aggregate_type", &e.AggregateType, false)
	text(3, "aggregate_id", &e.AggregateID, true)
	text(4, "tenant_id", &e.TenantID, true)
	text(9, "last_error", &e.LastError, true)
	text(13, "locked_by", &e.LockedBy, true)
	text(15, "order_key", &e.OrderKey, true)
	text(18, "listener", &e.Listener, true)
	if err != nil {
		return outboxtype.Event{}, err
	}
	if r[16] != nil {
		if e.OrderSeq, err = intValue(r[16]); err != nil {
			return outboxtype.Event{}, fmt.Errorf("order_seq: %w", err)
		}
	}

	status, err := intValue(r[7])
	if err != nil {
		return outboxtype.Event{}, fmt.Errorf("status: %w", err)
	}
	e.Status = outboxtype.Status(status)
	attempts, err := intValue(r[8])
	if err != nil {
		return outboxtype.Event{}, fmt.Errorf("attempts: %w", err)
	}
	e.Attempts = int(attempts)

	if e.AvailableAt, err = d.decodeTime(r[10]); err != nil {
		return outboxtype.Event{}, fmt.Errorf("available_at: %w", err)
	}
	if e.CreatedAt, err = d.decodeTime(r[11]); err != nil {
		return outboxtype.Event{}, fmt.Errorf("created_at: %w", err)
	}
	if r[12] != nil {
		if e.DoneAt, err = d.decodeTime(r[12]); err != nil {
			return outboxtype.Event{}, fmt.Errorf("done_at: %w", err)
		}
	}
	if r[14] != nil {
		if e.LockedUntil, err = d.decodeTime(r[14]); err != nil {
			return outboxtype.Event{}, fmt.Errorf("locked_until: %w", err)
		}
	}
	if r[17] != nil {
		if e.FirstAttemptAt, err = d.decodeTime(r[17]); err != nil {
			return outboxtype.Event{}, fmt.Errorf("first_attempt_at: %w", err)
		}
	}

	if e.Payload, err = decodePayload(r[5]); err != nil {
		if mode == strict {
			return outboxtype.Event{}, fmt.Errorf("payload: %w", err)
		}
		e.Payload = lenientPayload(r[5])
	}
	if e.Headers, err = decodeHeaders(r[6]); err != nil {
		if mode == strict {
			return outboxtype.Event{}, fmt.Errorf("headers: %w", err)
		}
		e.Headers = nil
	}
	return e, nil
}

func textValue(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case []byte:
		return string(x), nil
	case nil:
		return "", errors.New("is NULL")
	default:
		return "", fmt.Errorf("has unexpected type %T", v)
	}
}

func intValue(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case int32:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int:
		return int64(x), nil
	case string:
		return strconv.ParseInt(x, 10, 64)
	case []byte:
		return strconv.ParseInt(string(x), 10, 64)
	case nil:
		return 0, errors.New("is NULL")
	default:
		return 0, fmt.Errorf("has unexpected type %T", v)
	}
}

func decodePayload(v any) (json.RawMessage, error) {
	s, err := textValue(v)
	if err != nil {
		return nil, err
	}
	if !json.Valid([]byte(s)) {
		return nil, errors.New("not valid JSON")
	}
	return json.RawMessage(s), nil
}

// lenientPayload presents a stored payload that is not JSON as a JSON string.
func lenientPayload(v any) json.RawMessage {
	s, _ := textValue(v)
	b, err := json.Marshal(s)
	if err != nil {
		return json.RawMessage(`null`)
	}
	return b
}

func decodeHeaders(v any) (map[string]string, error) {
	if v == nil {
		return nil, nil
	}
	s, err := textValue(v)
	if err != nil {
		return nil, err
	}
	var h map[string]string
	if err := json.Unmarshal([]byte(s), &h); err != nil {
		return nil, fmt.Errorf("not a JSON object of strings: %w", err)
	}
	if len(h) == 0 {
		return nil, nil
	}
	return h, nil
}

// scanEvents decodes every row. A row that does not decode is reported in bad (strict)
// or kept leniently; only an error of the query itself fails the call.
func scanEvents(rows *sql.Rows, d *dialect, mode decodeMode) (events []outboxtype.Event, bad []outboxtype.RowError, err error) {
	for rows.Next() {
		var r rawRow
		if err := r.scan(rows); err != nil {
			return nil, nil, err
		}
		e, err := r.decode(d, mode)
		if err != nil {
			bad = append(bad, outboxtype.RowError{EventID: r.id(), Err: err})
			continue
		}
		events = append(events, e)
	}
	return events, bad, rows.Err()
}
