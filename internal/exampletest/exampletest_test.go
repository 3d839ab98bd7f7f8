package exampletest

import (
	"strings"
	"testing"

	"github.com/outboxkit/outbox/internal/testdb"
)

func TestMain(m *testing.M) { testdb.VerifyTestMain(m) }

const goodBanner = `outbox quickstart: gin + gorm + fx on SQLite
database  /tmp/outbox-quickstart-123456/quickstart.db

  orders   POST http://127.0.0.1:41234/orders
  admin    http://127.0.0.1:41234/outbox/admin/#token=0123456789abcdef0123456789abcdef
  metrics  http://127.0.0.1:41234/metrics

Try it:
`

func TestParseBanner(t *testing.T) {
	t.Parallel()
	b, err := parseBanner(goodBanner)
	if err != nil {
		t.Fatal(err)
	}
	want := banner{
		orders:   "http://127.0.0.1:41234/orders",
		admin:    "http://127.0.0.1:41234/outbox/admin/",
		token:    "0123456789abcdef0123456789abcdef",
		metrics:  "http://127.0.0.1:41234/metrics",
		database: "/tmp/outbox-quickstart-123456/quickstart.db",
	}
	if b != want {
		t.Errorf("got %+v\nwant %+v", b, want)
	}

	for _, tt := range []struct{ name, old, new, wantErr string }{
		{"no admin line", "  admin    ", "  admin: ", "no admin line"},
		{"one-space indent", "  orders   POST", " orders   POST", "no orders line"},
		{"no fragment", "/#token=0123456789abcdef0123456789abcdef", "/", "no #token= fragment"},
		{"other fragment", "#token=", "#key=", "token=<32 hex characters>"},
		{"unbound port", "127.0.0.1:41234/metrics", "127.0.0.1:0/metrics", "bound port"},
		{"not loopback", "127.0.0.1:41234/orders", "0.0.0.0:41234/orders", "127.0.0.1"},
		{"no database line", "database  ", "db ", "no database line"},
		{"admin without slash", "/outbox/admin/#", "/outbox/admin#", "must end with a slash"},
	} {
		_, err := parseBanner(strings.Replace(goodBanner, tt.old, tt.new, 1))
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.wantErr)
		}
	}
}

func TestParseMetrics(t *testing.T) {
	t.Parallel()
	text := `# HELP outbox_dispatch_total Finished delivery attempts.
# TYPE outbox_dispatch_total counter
outbox_dispatch_total{path="cold",outcome="done"} 2
outbox_dispatch_total{path="hot",outcome="done"} 3
outbox_dispatch_total{path="hot",outcome="retry"} 1
outbox_events{outbox="a \"quoted\" name, with comma",status="dead"} 1 1700000000000
outbox_stats_up 1
go_gc_duration_seconds{quantile="0.5"} 1.5e-05
`
	samples, err := parseMetrics(text)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"outbox_dispatch_total", map[string]string{"outcome": "done"}, 5},
		{"outbox_dispatch_total", nil, 6},
		{"outbox_events", map[string]string{"status": "dead", "outbox": `a "quoted" name, with comma`}, 1},
		{"outbox_stats_up", nil, 1},
		{"go_gc_duration_seconds", map[string]string{"quantile": "0.5"}, 1.5e-05},
	} {
		if got, found := sum(samples, tt.name, tt.labels); !found || got != tt.want {
			t.Errorf("%s%v = %v (found %t), want %v", tt.name, tt.labels, got, found, tt.want)
		}
	}
	if _, found := sum(samples, "outbox_queue_depth", nil); found {
		t.Error("found a series that is not there")
	}
	for _, bad := range []string{`x{a="b} 1`, `x{a=b} 1`, `x 1 2 3`, `x one`, `{a="b"} 1`} {
		if _, err := parseMetrics(bad); err == nil {
			t.Errorf("parseMetrics(%q) succeeded, want an error", bad)
		}
	}
}

func TestCheckSamples(t *testing.T) {
	t.Parallel()
	text := `outbox_dispatch_total{path="hot",outcome="done"} 5
outbox_dispatch_total{path="cold",outcome="retry"} 4
outbox_dispatch_total{path="cold",outcome="dead"} 2
outbox_listener_duration_seconds_count{outcome="done"} 9
outbox_queue_depth{path="hot"} 0
outbox_events{status="done"} 5
outbox_events{status="dead"} 1
outbox_dead_events 1
outbox_stats_up 1
go_goroutines 12
process_start_time_seconds 1.7e9
`
	samples, err := parseMetrics(text)
	if err != nil {
		t.Fatal(err)
	}
	if missing := checkSamples(samples, 5, 1); missing != "" {
		t.Errorf("complete scrape: %s", missing)
	}
	if missing := checkSamples(samples, 5, 2); !strings.Contains(missing, "outbox_events") {
		t.Errorf("wrong dead count: %q, want outbox_events named", missing)
	}
	samples, _ = parseMetrics(strings.Replace(text, "outbox_stats_up 1", "outbox_stats_up 0", 1))
	if missing := checkSamples(samples, 5, 1); !strings.Contains(missing, "outbox_stats_up") {
		t.Errorf("stats down: %q, want outbox_stats_up named", missing)
	}
}

func TestBadLines(t *testing.T) {
	t.Parallel()
	out := `time=x level=INFO msg="dispatcher started"
time=x level=ERROR msg="event moved to dead" component=dispatcher event_id=1
time=x level=ERROR msg="poll failed" error=boom
WARNING: DATA RACE
time=x level=ERROR msg="listener panicked" panic=boom
panic: runtime error
time=x level=WARN msg="confirmation email failed"
`
	got := badLines(out)
	want := []string{
		`time=x level=ERROR msg="poll failed" error=boom`,
		"WARNING: DATA RACE",
		`time=x level=ERROR msg="listener panicked" panic=boom`,
		"panic: runtime error",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("badLines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestDSNPassword(t *testing.T) {
	t.Parallel()
	for dsn, want := range map[string]string{
		"postgres://app:s3cret@127.0.0.1:5432/db?sslmode=disable": "s3cret",
		"postgres://app@127.0.0.1:5432/db":                        "",
		"root:outbox@tcp(127.0.0.1:3306)/db?parseTime=true":       "outbox",
		"root@tcp(127.0.0.1:3306)/db":                             "",
		"host=localhost dbname=x":                                 "",
	} {
		if got := dsnPassword(dsn); got != want {
			t.Errorf("dsnPassword(%q) = %q, want %q", dsn, got, want)
		}
	}
}
