package sqlstore

import (
	"encoding/json"
	"maps"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/internal/fuzztally"
)

// The fuzz targets in this file feed what a store reads back from the table (the
// headers JSON column, the payload, the time texts, a whole row) to the decoders. A
// row that does not decode must be rejected with an error naming its column (the store
// wraps it in a RowError), never panic, and anything that decodes must survive being
// encoded and decoded again unchanged. Their seeds are in testdata/fuzz; plain
// `go test` replays them.

// FuzzDecodeHeaders decodes the headers column, as text and as bytes.
func FuzzDecodeHeaders(f *testing.F) {
	for _, s := range []string{
		`{"trace":"abc","k":"v"}`, `{}`, `null`, `[]`, `{"a":1}`, `{"a":null}`, `{"a":"b"`,
		`{"\u00e9":"\ud800"}`, "{\"a\":\"\xff\"}", `{"a":"b","a":"c"}`, `"x"`, ``, ` {"a" : "b"} `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := decodeHeaders(string(data))
		hb, errb := decodeHeaders(data)
		fuzztally.Record(err != nil)
		if (err == nil) != (errb == nil) || !maps.Equal(h, hb) {
			t.Fatalf("text and bytes decode differently: %v, %v / %v, %v", h, err, hb, errb)
		}
		row := validRawRow()
		row[6] = string(data)
		if err != nil {
			if h != nil {
				t.Fatalf("error %v with headers %v", err, h)
			}
			if _, serr := row.decode(SQLite, strict); serr == nil || !strings.HasPrefix(serr.Error(), "headers: ") {
				t.Fatalf("strict decode of a row with headers %q: %v, want a headers error", data, serr)
			}
			e, lerr := row.decode(SQLite, lenient)
			if lerr != nil || e.Headers != nil {
				t.Fatalf("lenient decode of a row with headers %q: %v, %v; want nil headers", data, e.Headers, lerr)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		if h != nil && len(h) == 0 {
			t.Fatal("empty non-nil headers")
		}
		enc, err := encodeHeaders(h)
		if err != nil {
			t.Fatalf("re-encode %v: %v", h, err)
		}
		if h == nil {
			if enc != nil {
				t.Fatalf("no headers encoded as %v", enc)
			}
			return
		}
		back, err := decodeHeaders(enc)
		if err != nil || !maps.Equal(back, h) {
			t.Fatalf("headers %v do not round-trip: %v, %v", h, back, err)
		}
		e, err := row.decode(SQLite, strict)
		if err != nil || !maps.Equal(e.Headers, h) {
			t.Fatalf("row with headers %q: %v, %v", data, e.Headers, err)
		}
	})
}

// FuzzDecodeTime parses two time texts as the time columns hold them. A parsed time is
// UTC with microsecond precision; when SQLite can store it, its text encodes and
// decodes back to the same instant, and text order is time order.
func FuzzDecodeTime(f *testing.F) {
	f.Add("2026-01-02T03:04:05.123456Z", "2026-01-02T03:04:05.123457Z")
	f.Add("2026-01-02 03:04:05.1+05:45", "2026-01-01T21:19:05.1Z")
	f.Add("2026-01-02 03:04:05 -0330 NDT", "2026-01-02 03:04:05")
	f.Add("0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999999Z")
	f.Add("0000-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00")
	f.Add("", "2026-13-01T00:00:00Z")
	f.Fuzz(func(t *testing.T, a, b string) {
		ta, erra := decodeTime(a)
		if tb, err := decodeTime([]byte(a)); (err == nil) != (erra == nil) || !tb.Equal(ta) {
			t.Fatalf("text and bytes decode %q differently", a)
		}
		tb, errb := decodeTime(b)
		fuzztally.Record(erra != nil || errb != nil)
		for _, c := range []struct {
			text string
			t    time.Time
			err  error
		}{{a, ta, erra}, {b, tb, errb}} {
			if c.err != nil {
				if !c.t.IsZero() || !strings.Contains(c.err.Error(), "time") {
					t.Fatalf("decodeTime(%q) = %v, %v", c.text, c.t, c.err)
				}
				continue
			}
			if c.t.Location() != time.UTC || !c.t.Equal(c.t.Truncate(time.Microsecond)) {
				t.Fatalf("decodeTime(%q) = %v: not UTC microseconds", c.text, c.t)
			}
		}
		if erra != nil || errb != nil {
			return
		}
		ea, erra := encodeSQLiteTime(ta)
		eb, errb := encodeSQLiteTime(tb)
		if erra != nil || errb != nil {
			return // outside the years SQLite text holds; the encoder says so
		}
		if back, err := decodeTime(ea); err != nil || !back.Equal(ta) {
			t.Fatalf("%v encoded as %v decodes to %v, %v", ta, ea, back, err)
		}
		if got, want := strings.Compare(ea.(string), eb.(string)), ta.Compare(tb); got != want {
			t.Fatalf("text order %q vs %q is %d, time order %d", ea, eb, got, want)
		}
	})
}

// FuzzDecodeRow decodes a whole row whose columns hold arbitrary text, in the strict
// mode (delivery) and the lenient one (inspection).
func FuzzDecodeRow(f *testing.F) {
	f.Add("01J", "OrderPlaced", "Order", "o-1", `{"id":1}`, `{"k":"v"}`, "0", "0",
		"2026-01-02T03:04:05.000000Z", "2026-01-02T03:04:05.000000Z", "", false)
	f.Add("01J", "T", "__GLOBAL__", "", `not json`, `{"k":1}`, "3", "5",
		"2026-01-02T03:04:05Z", "2026-01-02 03:04:05", "2026-01-02T03:04:06Z", true)
	f.Add("", "", "", "", ``, ``, "x", "-1", "", "", "bad", false)
	f.Add("a", "b", "c", "d", `"\ud800"`, `null`, "99999999999999999999", "2147483648",
		"0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999Z", "", true)
	f.Fuzz(func(t *testing.T, id, typ, aggType, aggID, payload, headers, status, attempts, availableAt, createdAt, doneAt string, asBytes bool) {
		var r rawRow
		text := func(s string) any {
			if asBytes {
				return []byte(s)
			}
			return s
		}
		r[0], r[1], r[2], r[5], r[7], r[8], r[10], r[11] = text(id), text(typ), text(aggType), text(payload),
			text(status), text(attempts), text(availableAt), text(createdAt)
		if aggID != "" {
			r[3] = text(aggID)
		}
		if headers != "" {
			r[6] = text(headers)
		}
		if doneAt != "" {
			r[12] = text(doneAt)
		}
		d := SQLite
		se, serr := r.decode(d, strict)
		le, lerr := r.decode(d, lenient)
		fuzztally.Record(serr != nil)
		if serr == nil && (lerr != nil || !reflect.DeepEqual(se, le)) {
			t.Fatalf("strict decode %+v, lenient %+v, %v", se, le, lerr)
		}
		for _, err := range []error{serr, lerr} {
			if err != nil && !namesColumn(err) {
				t.Fatalf("error does not name its column: %v", err)
			}
		}
		if lerr != nil {
			if serr == nil {
				t.Fatal("lenient rejects what strict accepts")
			}
			return
		}
		// Lenient decoding always yields something a JSON response can carry.
		if !json.Valid(le.Payload) {
			t.Fatalf("lenient payload %q is not JSON", le.Payload)
		}
		for _, tm := range []time.Time{le.AvailableAt, le.CreatedAt, le.DoneAt} {
			if !tm.IsZero() && (tm.Location() != time.UTC || !tm.Equal(tm.Truncate(time.Microsecond))) {
				t.Fatalf("time %v is not UTC microseconds", tm)
			}
		}
		if serr != nil {
			if !strings.HasPrefix(serr.Error(), "payload: ") && !strings.HasPrefix(serr.Error(), "headers: ") {
				t.Fatalf("strict error %v, lenient accepts", serr)
			}
			return
		}
		// An accepted row encodes back to a row that decodes to the same event.
		back, ok := encodeRow(t, d, se)
		if !ok {
			return
		}
		again, err := back.decode(d, strict)
		if err != nil || !reflect.DeepEqual(again, se) {
			t.Fatalf("row does not round-trip:\n got %+v, %v\nwant %+v", again, err, se)
		}
	})
}

// namesColumn reports whether a decode error starts with the column it concerns.
func namesColumn(err error) bool {
	for _, c := range []string{"event_id", "event_type", "aggregate_type", "aggregate_id", "tenant_id", "last_error",
		"locked_by", "status", "attempts", "available_at", "created_at", "done_at", "locked_until", "payload", "headers"} {
		if strings.HasPrefix(err.Error(), c+": ") {
			return true
		}
	}
	return false
}

// validRawRow returns a row of selectColumns that decodes.
func validRawRow() rawRow {
	return rawRow{"01J", "T", "__GLOBAL__", nil, nil, `{}`, nil, int64(0), int64(0), nil,
		"2026-01-02T03:04:05.000000Z", "2026-01-02T03:04:05.000000Z", nil, nil, nil}
}

// encodeRow writes e back in the form the SQLite dialect stores, as a driver returns it.
// It reports false when a time is outside what the dialect can encode.
func encodeRow(t *testing.T, d *dialect, e outboxtype.Event) (rawRow, bool) {
	t.Helper()
	var r rawRow
	enc := func(tm time.Time) (any, bool) {
		v, err := d.time(tm)
		return v, err == nil
	}
	var ok bool
	if r[10], ok = enc(e.AvailableAt); !ok {
		return r, false
	}
	if r[11], ok = enc(e.CreatedAt); !ok {
		return r, false
	}
	if !e.DoneAt.IsZero() {
		if r[12], ok = enc(e.DoneAt); !ok {
			return r, false
		}
	}
	h, err := encodeHeaders(e.Headers)
	if err != nil {
		t.Fatalf("encode headers %v: %v", e.Headers, err)
	}
	r[0], r[1], r[2], r[5], r[6], r[7], r[8] = e.ID, e.Type, e.AggregateType, string(e.Payload), h,
		strconv.Itoa(int(e.Status)), int64(e.Attempts)
	r[3], r[4], r[9], r[13] = nullString(e.AggregateID), nullString(e.TenantID), nullString(e.LastError), nullString(e.LockedBy)
	return r, true
}
