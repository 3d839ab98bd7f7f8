package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outbox/core/storage"
)

// TestIsolationStatements checks that every statement isolate may run again has an
// event column list that sizedSQL rewrites, on every dialect.
func TestIsolationStatements(t *testing.T) {
	tb := tableName{name: DefaultTable}
	for _, d := range []*dialect{Postgres, MySQL, SQLite} {
		qs := map[string]query{"get": d.getQuery(tb, "id")}
		p, err := d.pendingQuery(tb, storage.PendingParams{Now: time.Now(), Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		qs["pending"] = p
		if !d.claimInTx {
			c, err := d.claimQuery(tb, storage.ClaimParams{Token: "tok", TTL: time.Minute, Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			qs["claim"] = c
		}
		for name, q := range qs {
			sized, ok := d.sizedSQL(q.SQL)
			if !ok || strings.Contains(sized, "payload, ") || !strings.Contains(sized, d.sizeFunc+"(") {
				t.Errorf("%s %s: sizedSQL = %q, %v", d.name, name, sized, ok)
			}
			t.Logf("%s %s: %s", d.name, name, sized)
		}
	}
}

// TestRowFaultByServerState: an error can be one row's fault only when it is about the
// data; a restart, a lost connection or a full server met by a row's own read is the
// server's state, and must not make the row unreadable (seen in the fault suite: events
// moved to DEAD across PostgreSQL restarts).
func TestRowFaultByServerState(t *testing.T) {
	ctx := t.Context()
	for _, c := range []struct {
		err  error
		want bool
	}{
		{errors.New("ERROR: out of memory (SQLSTATE 54000)"), true},
		{errors.New("ERROR: invalid memory alloc request size 1073741824 (SQLSTATE XX000)"), true},
		{errors.New("ERROR: invalid input syntax for type json (SQLSTATE 22P02)"), true},
		{errors.New("FATAL: terminating connection due to administrator command (SQLSTATE 57P01)"), false},
		{errors.New("FATAL: the database system is starting up (SQLSTATE 57P03)"), false},
		{errors.New("ERROR: out of memory (SQLSTATE 53200)"), false},
		{errors.New("ERROR: deadlock detected (SQLSTATE 40P01)"), false},
		{errors.New("Error 1053 (08S01): Server shutdown in progress"), false},
		{errors.New("database disk image is malformed"), true},
		{context.Canceled, false},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), false},
	} {
		if got := rowFault(ctx, c.err); got != c.want {
			t.Errorf("rowFault(%q) = %v, want %v", c.err, got, c.want)
		}
	}
}
