package sqlstore

import (
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outbox/core/storage"
)

func TestParseBound(t *testing.T) {
	t.Parallel()
	cases := map[string]partition{
		"FOR VALUES FROM ('01KB0000000000000000000000') TO ('01KC0000000000000000000000')": {from: "01KB0000000000000000000000", to: "01KC0000000000000000000000"},
		"FOR VALUES FROM (MINVALUE) TO ('0')":                                              {fromMin: true, to: "0"},
		"FOR VALUES FROM ('it''s') TO (MAXVALUE)":                                          {from: "it's", toMax: true},
	}
	for in, want := range cases {
		got, err := parseBound(in)
		if err != nil || got != want {
			t.Errorf("parseBound(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	if p, err := parseBound("DEFAULT"); err != nil || !p.isDefault {
		t.Errorf("parseBound(DEFAULT) = %+v, %v", p, err)
	}
	for _, bad := range []string{"FOR VALUES IN ('a')", "FOR VALUES FROM (a) TO ('b')"} {
		if _, err := parseBound(bad); err == nil {
			t.Errorf("parseBound(%q) accepted it", bad)
		}
	}
}

func TestPartitionPeriods(t *testing.T) {
	t.Parallel()
	cfg, err := PartitionConfig{Period: 6 * time.Hour}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 30, 13, 14, 15, 0, time.UTC)
	start := cfg.periodStart(at)
	if want := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC); !start.Equal(want) {
		t.Fatalf("periodStart = %v, want %v", start, want)
	}
	p := partition{from: lowestID(start), to: lowestID(start.Add(cfg.Period))}
	s, e, ok := p.period()
	if !ok || !s.Equal(start) || !e.Equal(start.Add(6*time.Hour)) {
		t.Errorf("period() = %v, %v, %v", s, e, ok)
	}
	if _, _, ok := (partition{fromMin: true, to: p.to}).period(); ok {
		t.Error("a MINVALUE partition has a period")
	}
	if end, ok := (partition{fromMin: true, to: p.to}).end(); !ok || !end.Equal(e) {
		t.Errorf("the end of a MINVALUE partition = %v, %v; want %v", end, ok, e)
	}
	for _, p := range []partition{{from: p.from, toMax: true}, {isDefault: true}, {from: p.from, to: "b"}} {
		if _, ok := p.end(); ok {
			t.Errorf("%+v has an end", p)
		}
	}
	pt := partitionTable(tableName{name: "outbox_event"}, start)
	if pt.name != "outbox_event_p202611301200" {
		t.Errorf("partition name %s", pt.name)
	}
	tbl := tableName{name: "outbox_event"}
	for name, want := range map[string]bool{pt.name: true, "outbox_event_pconverted": true, "outbox_event_p202611301299": false, "other_p202611301200": false, "outbox_event": false} {
		if got := isPartitionName(tbl, name); got != want {
			t.Errorf("isPartitionName(%s) = %v", name, got)
		}
	}
	for _, good := range []time.Duration{time.Minute, 15 * time.Minute, time.Hour, 8 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour} {
		if _, err := (PartitionConfig{Period: good}).withDefaults(); err != nil {
			t.Errorf("Period %s: %v", good, err)
		}
	}
	for _, bad := range []time.Duration{30 * time.Second, 7 * time.Minute, 90 * time.Minute, 5 * time.Hour, 36 * time.Hour} {
		if _, err := (PartitionConfig{Period: bad}).withDefaults(); err == nil {
			t.Errorf("Period %s accepted", bad)
		}
	}
}

func TestPartitionCovers(t *testing.T) {
	t.Parallel()
	p := partition{from: "b", to: "d"}
	for _, c := range []struct {
		from, to      string
		covers, overl bool
	}{{"b", "d", true, true}, {"b", "c", true, true}, {"a", "c", false, true}, {"c", "e", false, true}, {"d", "e", false, false}} {
		if p.covers(c.from, c.to) != c.covers || p.overlaps(c.from, c.to) != c.overl {
			t.Errorf("[%s, %s): covers %v, overlaps %v", c.from, c.to, p.covers(c.from, c.to), p.overlaps(c.from, c.to))
		}
	}
	if !(partition{fromMin: true, to: "d"}).covers("a", "c") {
		t.Error("a MINVALUE partition does not cover what it holds")
	}
}

func TestPartitionSetPeriod(t *testing.T) {
	t.Parallel()
	day := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	ps := &partitionSet{partitioned: true, parts: []partition{
		{fromMin: true, to: lowestID(day)},
		{from: lowestID(day), to: lowestID(day.Add(time.Hour))},
		{from: lowestID(day.Add(time.Hour)), to: "b"},
	}}
	if p, ok := ps.periodOf(); !ok || p != time.Hour {
		t.Errorf("periodOf = %s, %v; want 1h", p, ok)
	}
	if _, ok := (&partitionSet{partitioned: true, parts: ps.parts[2:]}).periodOf(); ok {
		t.Error("a set with no period's partition has a period")
	}
}

func TestPartitionSetHolds(t *testing.T) {
	t.Parallel()
	day := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	ps := &partitionSet{partitioned: true, parts: []partition{
		{fromMin: true, to: "0"},
		{from: lowestID(day), to: lowestID(day.Add(24 * time.Hour))},
		{from: lowestID(day.Add(48 * time.Hour)), to: lowestID(day.Add(72 * time.Hour))},
	}}
	id := func(at time.Time) string { return lowestID(at)[:10] + "ABCDEFGHJKMNPQRS" }
	cases := map[string]bool{
		"":                true, // below '0': the MINVALUE partition
		"-x":              true,
		id(day):           true,
		id(day) + ".HASH": true,
		id(day.Add(24*time.Hour - time.Millisecond)): true,
		id(day.Add(24 * time.Hour)):                  false, // a gap
		id(day.Add(50 * time.Hour)):                  true,
		id(day.Add(72 * time.Hour)):                  false,
		"bare":                                       false,
	}
	for in, want := range cases {
		if got := ps.holds(in); got != want {
			t.Errorf("holds(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestPurgeableCondition(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	cond := purgeableCondition(storagePurge(now))
	want := "status = 1 AND COALESCE(done_at, created_at) < TIMESTAMPTZ '2026-11-23 00:00:00.000000+00'" +
		" OR (status IN (1, 3) OR status >= 5) AND status <> 1 AND COALESCE(done_at, created_at) < TIMESTAMPTZ '2026-11-16 00:00:00.000000+00'" +
		" OR status IN (0, 2, 4) AND created_at < TIMESTAMPTZ '2026-11-01 00:00:00.000000+00'"
	if cond != want {
		t.Errorf("purgeableCondition =\n%s\nwant\n%s", cond, want)
	}
	if q := keptRowsQuery(postgresDialect, tableName{name: "p"}, storagePurge(now)); strings.Count(q, "LIMIT 1) IS NOT NULL") != 3 {
		t.Errorf("keptRowsQuery = %s", q)
	}
}

func storagePurge(now time.Time) storage.PurgeParams {
	return storage.PurgeParams{Before: now.Add(-7 * 24 * time.Hour), DeadBefore: now.Add(-14 * 24 * time.Hour), UndeliveredBefore: now.Add(-29 * 24 * time.Hour)}
}

// TestPurgeQueryIDRange: on a partitioned table the purge's batches keep to the IDs of
// the partitions the maintenance has looked at (and of the ranges after the periods).
func TestPurgeQueryIDRange(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	tbl := tableName{name: "outbox_event"}
	q, err := postgresDialect.purgeQuery(tbl, storage.PurgeParams{Before: at, Limit: 500}, idRange{below: "B", from: "F"})
	if err != nil {
		t.Fatal(err)
	}
	want := `DELETE FROM "outbox_event" WHERE event_id = ANY(ARRAY(SELECT event_id FROM "outbox_event" WHERE (status IN (1, 3) OR status >= 5)` +
		` AND COALESCE(done_at, created_at) < $1 AND (event_id < $2 OR event_id >= $3) ORDER BY COALESCE(done_at, created_at), event_id LIMIT $4 FOR UPDATE SKIP LOCKED))` +
		` AND (status IN (1, 3) OR status >= 5) AND COALESCE(done_at, created_at) < $5`
	if q.SQL != want {
		t.Errorf("purge with an ID range:\n%s\nwant\n%s", q.SQL, want)
	}
	if len(q.Args) != 5 || q.Args[1] != "B" || q.Args[2] != "F" {
		t.Errorf("args %v", q.Args)
	}
	u := postgresDialect.purgeUndeliveredQuery(tbl, at, false, 20, idRange{below: "B"})
	if !strings.Contains(u.SQL, "created_at < $1 AND event_id < $2 ORDER BY created_at, event_id LIMIT $3") {
		t.Errorf("undelivered purge with an ID range: %s", u.SQL)
	}
}
