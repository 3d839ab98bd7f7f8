package sqlstore

import (
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
