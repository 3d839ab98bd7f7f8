package exampletest

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// checkMetrics scrapes /metrics until the outbox series show the story: the hook's
// dispatch counters and queue gauge, the stats collector's table counts (five more DONE
// and one more DEAD than before), and the Go and process collectors.
func (s *story) checkMetrics(before counts) {
	s.t.Helper()
	wantDone := float64(before["DONE"] + 5)
	wantDead := float64(before["DEAD"] + 1)
	s.p.eventually(s.t, "the outbox series on /metrics", metricsTimeout, func() (bool, string) {
		r := s.do(http.MethodGet, s.b.metrics, "", "", "")
		if r.status != http.StatusOK {
			return false, r.String()
		}
		samples, err := parseMetrics(string(r.body))
		if err != nil {
			s.t.Fatalf("parse %s: %v", s.b.metrics, err)
		}
		if missing := checkSamples(samples, wantDone, wantDead); missing != "" {
			return false, missing
		}
		return true, ""
	})
}

// checkSamples returns what the scrape lacks, or "".
func checkSamples(samples []sample, wantDone, wantDead float64) string {
	type want struct {
		name   string
		labels map[string]string
		ok     func(v float64) bool
		says   string
	}
	atLeast := func(n float64) func(float64) bool { return func(v float64) bool { return v >= n } }
	equal := func(n float64) func(float64) bool { return func(v float64) bool { return v == n } }
	for _, w := range []want{
		// Three OrderPlaced and two emails delivered; two deaths of the bounced email,
		// each after two failed attempts.
		{"outbox_dispatch_total", map[string]string{"outcome": "done"}, atLeast(5), ">= 5"},
		{"outbox_dispatch_total", map[string]string{"outcome": "retry"}, atLeast(4), ">= 4"},
		{"outbox_dispatch_total", map[string]string{"outcome": "dead"}, atLeast(2), ">= 2"},
		{"outbox_listener_duration_seconds_count", nil, atLeast(9), ">= 9"},
		{"outbox_queue_depth", nil, atLeast(0), "present"},
		{"outbox_events", map[string]string{"status": "done"}, equal(wantDone), fmt.Sprint(wantDone)},
		{"outbox_events", map[string]string{"status": "dead"}, equal(wantDead), fmt.Sprint(wantDead)},
		{"outbox_dead_events", nil, equal(wantDead), fmt.Sprint(wantDead)},
		{"outbox_stats_up", nil, equal(1), "1"},
		{"go_goroutines", nil, atLeast(1), ">= 1"},
		{"process_start_time_seconds", nil, atLeast(1), "present"},
	} {
		v, found := sum(samples, w.name, w.labels)
		if !found || !w.ok(v) {
			return fmt.Sprintf("%s%v = %v (found: %t), want %s", w.name, w.labels, v, found, w.says)
		}
	}
	return ""
}

// sample is one sample of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// sum adds the values of the samples named name whose labels include labels, and
// reports whether there was any.
func sum(samples []sample, name string, labels map[string]string) (float64, bool) {
	var (
		total float64
		found bool
	)
	for _, s := range samples {
		if s.name != name || !hasLabels(s.labels, labels) {
			continue
		}
		total += s.value
		found = true
	}
	return total, found
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// parseMetrics parses the Prometheus text exposition format: comment lines are skipped,
// every other line is name{labels} value [timestamp].
func parseMetrics(text string) ([]sample, error) {
	var out []sample
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("line %q: %w", line, err)
		}
		out = append(out, s)
	}
	return out, nil
}

func parseSample(line string) (sample, error) {
	s := sample{labels: map[string]string{}}
	end := strings.IndexAny(line, "{ ")
	if end <= 0 {
		return s, errors.New("no metric name")
	}
	s.name, line = line[:end], line[end:]
	if strings.HasPrefix(line, "{") {
		rest, err := parseLabels(line[1:], s.labels)
		if err != nil {
			return s, err
		}
		line = rest
	}
	fields := strings.Fields(line)
	if len(fields) == 0 || len(fields) > 2 {
		return s, errors.New("want a value and an optional timestamp")
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, fmt.Errorf("value: %w", err)
	}
	s.value = v
	return s, nil
}

// parseLabels parses `k="v",k2="v2"}` into labels and returns what follows the brace.
func parseLabels(line string, labels map[string]string) (string, error) {
	for {
		line = strings.TrimLeft(line, " ,")
		if strings.HasPrefix(line, "}") {
			return line[1:], nil
		}
		name, rest, ok := strings.Cut(line, "=")
		if !ok || !strings.HasPrefix(rest, `"`) {
			return "", errors.New("malformed label")
		}
		value, rest, err := unquoteLabel(rest[1:])
		if err != nil {
			return "", err
		}
		labels[strings.TrimSpace(name)] = value
		line = rest
	}
}

// unquoteLabel reads a label value up to its closing quote, undoing the escapes \\, \"
// and \n, and returns the value and what follows the quote.
func unquoteLabel(s string) (string, string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), s[i+1:], nil
		case '\\':
			if i+1 == len(s) {
				return "", "", errors.New("unterminated escape")
			}
			i++
			if s[i] == 'n' {
				b.WriteByte('\n')
			} else {
				b.WriteByte(s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", errors.New("unterminated label value")
}
