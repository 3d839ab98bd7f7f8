package outbox

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"
)

// The micro-benchmarks of the write path's CPU work: ID generation, envelope validation
// and encoding, and building the SQL. Run them with
//
//	go test -run '^$' -bench . -benchmem ./core/
//
// docs/BENCHMARKS.md has the end-to-end numbers.

// BenchmarkNewIDParallel measures NewID under contention: every writer shares one
// monotonic generator. BenchmarkNewID (id_test.go) is the single-goroutine case.
func BenchmarkNewIDParallel(b *testing.B) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = NewID()
		}
	})
}

type benchPayload struct {
	OrderID string `json:"order_id"`
	Amount  int64  `json:"amount"`
	Note    string `json:"note"`
}

func benchEnvelopes(n int, payload func(i int) any, headers map[string]string) []Envelope {
	envs := make([]Envelope, n)
	for i := range envs {
		envs[i] = Envelope{Type: "OrderPlaced", AggregateType: "Order", AggregateID: strconv.Itoa(i),
			Payload: payload(i), Headers: headers}
	}
	return envs
}

// BenchmarkEncodeEnvelopes measures validation and encoding (payload marshalling, ID
// generation) of the envelopes of one Write, per envelope shape.
func BenchmarkEncodeEnvelopes(b *testing.B) {
	structPayload := func(i int) any {
		return benchPayload{OrderID: "o-" + strconv.Itoa(i), Amount: int64(i), Note: "xxxxxxxxxxxxxxxx"}
	}
	raw := json.RawMessage(`{"order_id":"o-1","amount":1,"note":"xxxxxxxxxxxxxxxx"}`)
	rawPayload := func(int) any { return raw }
	for _, c := range []struct {
		name    string
		n       int
		payload func(int) any
		headers map[string]string
	}{
		{"struct", 1, structPayload, nil},
		{"raw", 1, rawPayload, nil},
		{"struct+headers", 1, structPayload, map[string]string{"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "source": "bench"}},
		{"struct/batch100", 100, structPayload, nil},
	} {
		b.Run(c.name, func(b *testing.B) {
			envs := benchEnvelopes(c.n, c.payload, c.headers)
			now := time.Now()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := encodeEnvelopes(envs, now, DefaultMaxPayloadBytes, nil, false); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*c.n), "ns/event")
		})
	}
}
