package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/outboxkit/outbox/core/internal/check"
	"github.com/outboxkit/outbox/core/internal/ids"
	"github.com/outboxkit/outbox/core/outboxtype"
)

// A time-partitioned outbox table (PostgreSQL 14 and later; package outboxpartition is
// its public face, docs/partitioning.md its guide). The table is
// PARTITION BY RANGE (event_id): event IDs are ULIDs, whose first 10 characters encode
// the millisecond they were made at, so byte order is time order and one partition
// holds the events of one period. event_id is COLLATE "C", so that the ranges compare
// bytes whatever the database's collation. The primary key stays (event_id), which
// holds the partition key: ON CONFLICT (event_id) and every statement by ID work
// unchanged, and event_id = $1 reads one partition. A fan-out delivery's ID,
// "<event ID>.<hash>", sorts right after its event's, in the same partition.
//
// A partition covers one period: from the lowest ULID of its first millisecond (its
// 10 time characters, then 16 '0') to the next period's, and is named
// <table>_p<YYYYMMDDHHMM> (UTC) after its start. MaintainPartitions creates the current
// period's and the next ones ahead, and drops the old ones whose rows the purge would
// all delete (partition_maintain.go); the purger runs it (Store.MaintainPartitions). There
// is no DEFAULT partition: an ID in no partition's range is refused
// (Store.checkPartitions), and DETACH PARTITION CONCURRENTLY is not allowed beside a
// DEFAULT partition.
//
// The other tables (key, audit, lease, pause) are not partitioned.

// PartitionConfig is the layout of a partitioned outbox table.
type PartitionConfig struct {
	// Period is the time one partition covers: a whole number of minutes that divides
	// an hour, of hours that divides a day, or of days. Periods start at the Unix epoch
	// (UTC). Defaults to a day.
	Period time.Duration
	// Ahead is the number of periods after the current one that MigratePartitionedTable
	// and MaintainPartitions create in advance. Defaults to 3.
	Ahead int
	// From is a time in the first period MigratePartitionedTable creates a partition
	// for (ConvertToPartitioned: the first period after the converted rows). Defaults to
	// now. MaintainPartitions does not read it.
	From time.Time
}

// The defaults of PartitionConfig.
const (
	defaultPartitionPeriod = 24 * time.Hour
	defaultPartitionsAhead = 3
)

func (c PartitionConfig) withDefaults() (PartitionConfig, error) {
	if c.Period == 0 {
		c.Period = defaultPartitionPeriod
	}
	if c.Ahead == 0 {
		c.Ahead = defaultPartitionsAhead
	}
	if err := checkPeriod(c.Period); err != nil {
		return c, err
	}
	switch {
	case c.Ahead < 0:
		return c, &outboxtype.ConfigError{Field: "Ahead", Reason: fmt.Sprintf("%d is negative", c.Ahead)}
	}
	return c, nil
}

// checkPeriod returns a *ConfigError unless p is a partition period: whole minutes that
// divide an hour, whole hours that divide a day, or whole days.
func checkPeriod(p time.Duration) error {
	day := 24 * time.Hour
	switch {
	case p < time.Minute || p%time.Minute != 0:
		return &outboxtype.ConfigError{Field: "Period", Reason: fmt.Sprintf("%s is not a whole number of minutes", p)}
	case p < time.Hour && time.Hour%p != 0, p > time.Hour && p < day && (p%time.Hour != 0 || day%p != 0), p > day && p%day != 0:
		return &outboxtype.ConfigError{Field: "Period", Reason: fmt.Sprintf("%s is neither minutes that divide an hour, hours that divide a day, nor whole days", p)}
	}
	return nil
}

// periodStart is the start of the period that holds at.
func (c PartitionConfig) periodStart(at time.Time) time.Time {
	ms := at.UnixMilli()
	p := c.Period.Milliseconds()
	start := ms - ms%p
	if ms < 0 && ms%p != 0 {
		start -= p
	}
	return time.UnixMilli(start).UTC()
}

// lowestID is the lowest ULID made at t: a partition's bound.
func lowestID(t time.Time) string { return ids.TimePrefix(t) + strings.Repeat("0", 16) }

// partitionTable is the partition of t for the period that starts at start.
func partitionTable(t tableName, start time.Time) tableName {
	return tableName{schema: t.schema, name: t.indexName("_p" + start.UTC().Format("200601021504"))}
}

// partition is one attached partition of the outbox table, as the catalog has it.
type partition struct {
	table tableName
	// from and to bound its IDs, from inclusive, to exclusive; fromMin and toMax mark
	// MINVALUE and MAXVALUE.
	from, to       string
	fromMin, toMax bool
	// detaching marks a partition a DETACH PARTITION … CONCURRENTLY left pending.
	detaching bool
	// isDefault marks the DEFAULT partition, which holds every ID no other one does
	// (MigratePartitionedTable makes none: it forbids DETACH … CONCURRENTLY).
	isDefault bool
}

// holds reports whether id is in p's range.
func (p partition) holds(id string) bool {
	return !p.isDefault && (p.fromMin || id >= p.from) && (p.toMax || id < p.to)
}

// end returns the time p's IDs end at: the millisecond of its upper bound, false when
// that is not the lowest ULID of a millisecond (MAXVALUE, the DEFAULT partition, an
// ID's range of the user's). The partition ConvertToPartitioned makes, from MINVALUE,
// has one.
func (p partition) end() (time.Time, bool) {
	if p.isDefault || p.toMax {
		return time.Time{}, false
	}
	end, ok := ids.Time(p.to)
	return end, ok && lowestID(end) == p.to
}

// period returns the start and end of the period p covers, false for a partition whose
// bounds are not both the lowest ULID of a millisecond.
func (p partition) period() (start, end time.Time, ok bool) {
	if p.isDefault || p.fromMin || p.toMax || strings.Trim(p.from[min(ids.TimePrefixLen, len(p.from)):], "0") != "" {
		return time.Time{}, time.Time{}, false
	}
	start, ok1 := ids.Time(p.from)
	end, ok2 := ids.Time(p.to)
	return start, end, ok1 && ok2 && lowestID(start) == p.from && lowestID(end) == p.to
}

// partitionSet is what the store knows of its table's partitioning.
type partitionSet struct {
	partitioned bool
	parts       []partition // the attached ones, not detaching, by from
	hasDefault  bool        // one of parts is the DEFAULT partition
}

// holds reports whether one of the set's partitions holds id: the last one that starts
// at or before it (the ranges do not overlap), or the DEFAULT partition.
func (ps *partitionSet) holds(id string) bool {
	if ps.hasDefault {
		return true
	}
	i := sort.Search(len(ps.parts), func(i int) bool { p := ps.parts[i]; return !p.fromMin && !p.isDefault && p.from > id }) - 1
	return i >= 0 && ps.parts[i].holds(id)
}

// covers reports whether p holds every ID from from (inclusive) to to (exclusive).
func (p partition) covers(from, to string) bool {
	return !p.isDefault && (p.fromMin || p.from <= from) && (p.toMax || p.to >= to)
}

// overlaps reports whether p holds an ID from from (inclusive) to to (exclusive).
func (p partition) overlaps(from, to string) bool {
	return !p.isDefault && (p.fromMin || p.from < to) && (p.toMax || from < p.to)
}

// isPartitioned reports whether t exists and is a partitioned table.
func isPartitioned(ctx context.Context, db outboxtype.Executor, d *dialect, t tableName) (bool, error) {
	rows, err := db.QueryContext(ctx, "SELECT 1 FROM pg_partitioned_table WHERE partrelid = to_regclass($1)", d.qualified(t))
	if err != nil {
		return false, fmt.Errorf("look for the partitioning of %s: %w", t, err)
	}
	found := rows.Next()
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return false, fmt.Errorf("look for the partitioning of %s: %w", t, err)
	}
	return found, nil
}

// partitions lists the partitions of t, by their lower bound.
func partitions(ctx context.Context, db outboxtype.Executor, d *dialect, t tableName) ([]partition, error) {
	rows, err := db.QueryContext(ctx, "SELECT n.nspname, c.relname, pg_get_expr(c.relpartbound, c.oid), i.inhdetachpending"+
		" FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_namespace n ON n.oid = c.relnamespace"+
		" WHERE i.inhparent = to_regclass($1)", d.qualified(t))
	if err != nil {
		return nil, fmt.Errorf("list the partitions of %s: %w", t, err)
	}
	defer rows.Close()
	var out []partition
	for rows.Next() {
		var schema, name, bound string
		var detaching bool
		if err := rows.Scan(&schema, &name, &bound, &detaching); err != nil {
			return nil, fmt.Errorf("list the partitions of %s: %w", t, err)
		}
		p, err := parseBound(bound)
		if err != nil {
			return nil, fmt.Errorf("partition %s of %s: %w", name, t, err)
		}
		p.table, p.detaching = tableName{schema: schema, name: name}, detaching
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list the partitions of %s: %w", t, err)
	}
	slices.SortFunc(out, func(a, b partition) int {
		switch {
		case a.fromMin || a.isDefault:
			return -1
		case b.fromMin || b.isDefault:
			return 1
		}
		return strings.Compare(a.from, b.from)
	})
	return out, nil
}

// parseBound reads pg_get_expr's text of a range partition's bound:
// FOR VALUES FROM ('a') TO ('b'), either side possibly MINVALUE or MAXVALUE.
func parseBound(s string) (partition, error) {
	if s == "DEFAULT" {
		return partition{isDefault: true}, nil
	}
	rest, ok := strings.CutPrefix(s, "FOR VALUES FROM (")
	from, to, ok2 := strings.Cut(rest, ") TO (")
	to, ok3 := strings.CutSuffix(to, ")")
	if !ok || !ok2 || !ok3 {
		return partition{}, fmt.Errorf("unexpected bound %q", s)
	}
	var p partition
	var err1, err2 error
	p.from, p.fromMin, err1 = boundValue(from)
	p.to, p.toMax, err2 = boundValue(to)
	if err := errors.Join(err1, err2); err != nil {
		return partition{}, fmt.Errorf("bound %q: %w", s, err)
	}
	return p, nil
}

// boundValue reads one side of a bound: a quoted literal, or MINVALUE/MAXVALUE
// (infinite true).
func boundValue(s string) (v string, infinite bool, err error) {
	if s == "MINVALUE" || s == "MAXVALUE" {
		return "", true, nil
	}
	if len(s) < 2 || s[0] != '\'' || s[len(s)-1] != '\'' {
		return "", false, fmt.Errorf("unexpected value %s", s)
	}
	return strings.ReplaceAll(s[1:len(s)-1], "''", "'"), false, nil
}

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// partitionedCreate is the first statement of postgresDDL, the CREATE TABLE, made a
// partitioned table with event_id COLLATE "C".
func partitionedCreate(s ddlStatement) (ddlStatement, error) {
	const id = "event_id       VARCHAR(64)  NOT NULL PRIMARY KEY"
	if !strings.Contains(s.sql, id) || !strings.HasSuffix(s.sql, ")") {
		return s, errors.New("the CREATE TABLE has not the expected shape")
	}
	s.sql = strings.Replace(s.sql, id, `event_id       VARCHAR(64)  COLLATE "C" NOT NULL PRIMARY KEY`, 1) + " PARTITION BY RANGE (event_id)"
	return s, nil
}

// MigratePartitionedTable is [MigrateTable] of a partitioned table (PostgreSQL only):
// it creates the table partitioned by event_id when it does not exist, applies the
// later versions to it (they change the parent, which passes each change on to its
// partitions), then creates the partitions of cfg from the period of cfg.From on. On
// an existing table that is not partitioned it returns a *[ConfigError]: it converts
// no table (ConvertToPartitioned does).
func MigratePartitionedTable(ctx context.Context, db *sql.DB, d *Dialect, table string, cfg PartitionConfig) error {
	t, cfg, err := partitionedArgs(d, table, cfg)
	if err != nil {
		return err
	}
	exists, err := hasColumn(ctx, db, d, t, "event_id")
	if err != nil {
		return err
	}
	if exists {
		part, err := isPartitioned(ctx, db, d, t)
		if err != nil {
			return err
		}
		if !part {
			return &outboxtype.ConfigError{Field: "Table", Reason: fmt.Sprintf("%s exists and is not partitioned; ConvertToPartitioned converts it", t)}
		}
	}
	if err := migrateTable(ctx, db, d, t, true); err != nil {
		return err
	}
	_, err = ensurePartitions(ctx, db, d, t, cfg, cfg.From, 0, 0, &PartitionReport{})
	return err
}

// partitionedArgs checks the arguments of MigratePartitionedTable and
// ConvertToPartitioned, and fills cfg's defaults.
func partitionedArgs(d *Dialect, table string, cfg PartitionConfig) (tableName, PartitionConfig, error) {
	t, err := parseTableName(table)
	if err != nil {
		return t, cfg, err
	}
	if d != postgresDialect {
		return t, cfg, &outboxtype.ConfigError{Field: "Dialect", Reason: "a partitioned table needs PostgreSQL"}
	}
	if cfg, err = cfg.withDefaults(); err != nil {
		return t, cfg, err
	}
	if cfg.From.IsZero() {
		cfg.From = time.Now()
	}
	return t, cfg, nil
}

// convertedPartition is the name ConvertToPartitioned gives the table it converts, the
// partition of the IDs before the first period.
func convertedPartition(t tableName) tableName {
	return tableName{schema: t.schema, name: t.indexName("_pconverted")}
}

// ConvertToPartitioned makes the existing outbox table named table (PostgreSQL) a
// partitioned one, rows and all: MigrateTable brings it to the latest version first,
// then one transaction
//
//   - locks it ACCESS EXCLUSIVE (every read and write of the table waits until the
//     commit),
//   - renames it <table>_pconverted, and its indexes after it,
//   - makes its event_id COLLATE "C" (PostgreSQL rebuilds the indexes that hold
//     event_id; the rows are not rewritten),
//   - creates the partitioned table under the old name with every version applied,
//   - and attaches the old table as the partition of every ID before the end of
//     cfg.From's period (from MINVALUE), which reads it once to check the range.
//
// It then creates the partitions of cfg.Ahead periods after that one. The rows keep
// their IDs, and the events written until that period ends go to the converted
// partition too. MaintainPartitions drops it like any other once every row in it is
// one the purge would delete. An ID in the table at or after the bound (an ID of a
// later period, or one that is not a ULID and sorts after the ULIDs, "a…" or a
// lower-case UUID) returns a *[ConfigError] naming it, and leaves the table as it was.
// A table that is partitioned already returns a *[ConfigError].
func ConvertToPartitioned(ctx context.Context, db *sql.DB, d *Dialect, table string, cfg PartitionConfig) (err error) {
	t, cfg, err := partitionedArgs(d, table, cfg)
	if err != nil {
		return err
	}
	switch part, err := isPartitioned(ctx, db, d, t); {
	case err != nil:
		return err
	case part:
		return &outboxtype.ConfigError{Field: "Table", Reason: fmt.Sprintf("%s is partitioned already", t)}
	}
	if err := migrateTable(ctx, db, d, t, false); err != nil {
		return err
	}
	indexes, err := parentIndexes(ctx, db, d, t)
	if err != nil {
		return err
	}
	old := convertedPartition(t)
	first := cfg.periodStart(cfg.From).Add(cfg.Period)
	bound := lowestID(first)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("convert %s: %w", t, err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, ignoreDone(tx.Rollback()))
		}
	}()
	exec := func(stmts ...string) error {
		for _, s := range stmts {
			if _, err := tx.ExecContext(ctx, s); err != nil {
				return fmt.Errorf("convert %s: %s: %w", t, s, err)
			}
		}
		return nil
	}
	if err := exec("LOCK TABLE "+d.qualified(t)+" IN ACCESS EXCLUSIVE MODE",
		"ALTER TABLE "+d.qualified(t)+" RENAME TO "+d.quote(old.name)); err != nil {
		return err
	}
	aggregate := false
	for _, ix := range indexes {
		suffix, ok := strings.CutPrefix(ix.name, t.name)
		if !ok {
			continue // a name of the user's, or one shortened with a hash: it keeps it
		}
		aggregate = aggregate || suffix == aggregateListIndexSuffix
		if err := exec("ALTER INDEX " + d.qualified(tableName{schema: t.schema, name: ix.name}) + " RENAME TO " + d.quote(old.indexName(suffix))); err != nil {
			return err
		}
	}
	if err := exec("ALTER TABLE " + d.qualified(old) + ` ALTER COLUMN event_id TYPE VARCHAR(64) COLLATE "C"`); err != nil {
		return err
	}
	var last sql.NullString
	if err := tx.QueryRowContext(ctx, "SELECT MAX(event_id) FROM "+d.qualified(old)).Scan(&last); err != nil {
		return fmt.Errorf("convert %s: the highest ID: %w", t, err)
	}
	if last.Valid && last.String >= bound {
		return &outboxtype.ConfigError{Field: "Table", Reason: fmt.Sprintf("%s holds the ID %q, which sorts at or after %q, the first ID of the period after %s: "+
			"the converted table holds the IDs before it (a later From moves the bound; an ID that is not a ULID may sort after every ULID)",
			t, last.String, bound, cfg.From.UTC().Format(time.RFC3339))}
	}
	dd := d.ddl(d, t)
	create, err := partitionedCreate(dd.up[0])
	if err != nil {
		return fmt.Errorf("convert %s: %w", t, err)
	}
	stmts := []string{create.sql}
	for _, s := range dd.up[1:] {
		stmts = append(stmts, s.sql)
	}
	for _, m := range dd.later {
		for _, s := range m.up {
			stmts = append(stmts, s.sql)
		}
	}
	stmts = append(stmts, "ALTER TABLE "+d.qualified(t)+" ATTACH PARTITION "+d.qualified(old)+" FOR VALUES FROM (MINVALUE) TO ("+quoteLiteral(bound)+")")
	if aggregate {
		stmts = append(stmts, d.aggregateIndexQuery(t))
	}
	if err := exec(stmts...); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("convert %s: commit: %w", t, err)
	}
	_, err = ensurePartitions(ctx, db, d, t, cfg, first, 0, 0, &PartitionReport{})
	return err
}

// ensurePartitions creates the partitions of the current period of now and cfg.Ahead
// periods after it that are missing, each with createPartition, and returns their
// names, recording the time each took in rep. lockTimeout bounds each ATTACH's wait
// for its lock, stepTimeout each partition's transaction (0: no bound).
func ensurePartitions(ctx context.Context, db *sql.DB, d *dialect, t tableName, cfg PartitionConfig, now time.Time, lockTimeout, stepTimeout time.Duration, rep *PartitionReport) ([]string, error) {
	have, err := partitions(ctx, db, d, t)
	if err != nil {
		return nil, err
	}
	var created []string
	start := cfg.periodStart(now)
	for range cfg.Ahead + 1 {
		end := start.Add(cfg.Period)
		from, to := lowestID(start), lowestID(end)
		i := slices.IndexFunc(have, func(p partition) bool { return p.overlaps(from, to) })
		switch {
		case i >= 0 && have[i].covers(from, to):
			// The period's partition, or the one ConvertToPartitioned made.
		case i < 0:
			pt := partitionTable(t, start)
			began := time.Now()
			sctx, cancel := stepContext(ctx, stepTimeout)
			err := createPartition(sctx, db, d, t, pt, from, to, lockTimeout)
			cancel()
			if err != nil {
				return created, err
			}
			rep.record(pt.name, "create", began)
			created = append(created, pt.name)
		default:
			return created, fmt.Errorf("partition %s of %s overlaps the period from %s", have[i].table, t, start.Format(time.RFC3339))
		}
		start = end
	}
	return created, nil
}

// createPartition creates pt as a table of its own, with the columns of t, its primary
// key and its indexes named after pt (<partition>_claim_idx, …), then attaches it to t
// for the IDs from from to to, in one transaction. CREATE TABLE … PARTITION OF would
// lock t ACCESS EXCLUSIVE; ATTACH PARTITION locks it SHARE UPDATE EXCLUSIVE, which no
// read or write of events waits for, and finds pt's indexes equal to t's, so that it
// builds none. An index of t that is not one of its own suffixes (a name shortened with
// a hash) is built by the ATTACH, on the empty table.
func createPartition(ctx context.Context, db *sql.DB, d *dialect, t, pt tableName, from, to string, lockTimeout time.Duration) (err error) {
	indexes, err := parentIndexes(ctx, db, d, t)
	if err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create partition %s: %w", pt, err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(fmt.Errorf("create partition %s: %w", pt, err), ignoreDone(tx.Rollback()))
		}
	}()
	stmts := []string{
		"CREATE TABLE " + d.qualified(pt) + " (LIKE " + d.qualified(t) + " INCLUDING DEFAULTS INCLUDING STORAGE)",
		"ALTER TABLE " + d.qualified(pt) + " ADD CONSTRAINT " + d.quote(pt.indexName("_pkey")) + " PRIMARY KEY (event_id)",
	}
	for _, ix := range indexes {
		suffix, ok := strings.CutPrefix(ix.name, t.name)
		_, using, ok2 := strings.Cut(ix.def, " USING ")
		if ix.primary || !ok || !ok2 {
			continue
		}
		stmts = append(stmts, "CREATE INDEX "+d.quote(pt.indexName(suffix))+" ON "+d.qualified(pt)+" USING "+using)
	}
	if lockTimeout > 0 {
		stmts = append(stmts, fmt.Sprintf("SET LOCAL lock_timeout = %d", lockTimeout.Milliseconds()))
	}
	stmts = append(stmts, "ALTER TABLE "+d.qualified(t)+" ATTACH PARTITION "+d.qualified(pt)+
		" FOR VALUES FROM ("+quoteLiteral(from)+") TO ("+quoteLiteral(to)+")")
	for _, s := range stmts {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// index is one index of a table, as pg_get_indexdef writes it.
type index struct {
	name, def string
	primary   bool
}

// parentIndexes lists the indexes of t.
func parentIndexes(ctx context.Context, db *sql.DB, d *dialect, t tableName) ([]index, error) {
	rows, err := db.QueryContext(ctx, "SELECT i.relname, pg_get_indexdef(i.oid), x.indisprimary FROM pg_index x"+
		" JOIN pg_class i ON i.oid = x.indexrelid WHERE x.indrelid = to_regclass($1) ORDER BY i.relname", d.qualified(t))
	if err != nil {
		return nil, fmt.Errorf("list the indexes of %s: %w", t, err)
	}
	defer rows.Close()
	var out []index
	for rows.Next() {
		var ix index
		if err := rows.Scan(&ix.name, &ix.def, &ix.primary); err != nil {
			return nil, err
		}
		out = append(out, ix)
	}
	return out, rows.Err()
}

// loadPartitions reads through exec whether the store's table is partitioned, and its
// partitions.
func (s *Store) loadPartitions(ctx context.Context, exec outboxtype.Executor) (*partitionSet, error) {
	part, err := isPartitioned(ctx, exec, s.d, s.table)
	if err != nil || !part {
		return &partitionSet{}, err
	}
	all, err := partitions(ctx, exec, s.d, s.table)
	if err != nil {
		return nil, err
	}
	ps := &partitionSet{partitioned: true}
	for _, p := range all {
		if !p.detaching {
			ps.parts = append(ps.parts, p)
			ps.hasDefault = ps.hasDefault || p.isDefault
		}
	}
	return ps, nil
}

// checkPartitions refuses, on a partitioned table, the events whose ID no partition
// holds, before the INSERT, which would fail with SQLSTATE 23514 and abort the
// caller's transaction: an error wrapping [ErrInvalidArgument]. The store reads the
// partitions at its connection check and first write, and again when an ID is in none
// of those it knows (a partition created since), through exec, the caller's executor,
// so that a write in a transaction needs no second connection. A partition dropped
// since it was read is not seen: that INSERT fails (noPartition).
func (s *Store) checkPartitions(ctx context.Context, exec outboxtype.Executor, events []outboxtype.Event) error {
	if s.d != postgresDialect {
		return nil
	}
	ps, fresh := s.parts.Load(), false
	for i := range events {
		id := events[i].ID
		if ps != nil && (!ps.partitioned || ps.holds(id)) {
			continue
		}
		if !fresh {
			var err error
			if ps, err = s.loadPartitions(ctx, exec); err != nil {
				return err
			}
			s.parts.Store(ps)
			fresh = true
			if !ps.partitioned || ps.holds(id) {
				continue
			}
		}
		why := "its time has no partition"
		if _, ok := ids.Time(id); !ok {
			why = "it is not a ULID"
		}
		return check.Invalid("insert", "event %d: ID %q is in no partition of %s, which is partitioned by event ID: %s", i, id, s.table, why)
	}
	return nil
}

// noPartition reports PostgreSQL's "no partition of relation … found for row" (SQLSTATE
// 23514): an INSERT of an ID whose partition was dropped after the store read the
// partitions; or the violation of a frozen partition's constraint (23514 too): an
// INSERT into a partition that a maintenance is dropping.
func noPartition(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "no partition of relation") ||
		strings.Contains(msg, "SQLSTATE 23514") && strings.Contains(msg, `_frozen"`)
}
