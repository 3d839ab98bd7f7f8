package sqlstore

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// The micro-benchmarks of building the SQL of the write path and of the DONE update:
//
//	go test -run '^$' -bench . -benchmem ./core/internal/sqlstore/

// BenchmarkInsertQueries measures building the multi-row INSERT of one Write.
func BenchmarkInsertQueries(b *testing.B) {
	events := make([]outboxtype.Event, 100)
	now := time.Now()
	for i := range events {
		events[i] = outboxtype.Event{ID: fmt.Sprintf("01JBENCH%018d", i), Type: "OrderPlaced", AggregateType: "Order",
			AggregateID: strconv.Itoa(i), Payload: json.RawMessage(`{"order_id":"o-` + strconv.Itoa(i) + `","amount":` + strconv.Itoa(i) + `}`),
			CreatedAt: now, AvailableAt: now}
	}
	table, _ := parseTableName(DefaultTable)
	for _, d := range []*dialect{Postgres, MySQL, SQLite} {
		for _, n := range []int{1, 100} {
			b.Run(d.name+"/"+strconv.Itoa(n), func(b *testing.B) {
				p := storage.InsertParams{Events: events[:n]}
				now := time.Now()
				b.ReportAllocs()
				for b.Loop() {
					if _, err := d.insertQueries(table, p, now); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkMarkDoneQueries measures building the DONE update of one event and of a
// batch of 64.
func BenchmarkMarkDoneQueries(b *testing.B) {
	ids := make([]string, 64)
	for i := range ids {
		ids[i] = fmt.Sprintf("01JBENCH%018d", i)
	}
	table, _ := parseTableName(DefaultTable)
	for _, d := range []*dialect{Postgres, MySQL, SQLite} {
		for _, n := range []int{1, 64} {
			b.Run(d.name+"/"+strconv.Itoa(n), func(b *testing.B) {
				p := storage.MarkDoneParams{IDs: ids[:n], DoneAt: time.Now()}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := d.markDoneQueries(table, p); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
