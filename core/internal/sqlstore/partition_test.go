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
	if name := partitionTable(tableName{name: "outbox_event"}, start).name; name != "outbox_event_p2026113012" {
		t.Errorf("partition name %s", name)
	}
	for _, bad := range []time.Duration{30 * time.Minute, 5 * time.Hour, 36 * time.Hour} {
		if _, err := (PartitionConfig{Period: bad}).withDefaults(); err == nil {
			t.Errorf("Period %s accepted", bad)
		}
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
