package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// Partition maintenance: the partitions ahead are created, and an old partition is
// dropped when every row in it is one the purge would delete. The drop is fenced so
// that no row can become one the purge would keep (a replay) between the check and the
// drop:
//
//  1. Freeze, in one transaction under a short lock_timeout: ALTER TABLE <partition>
//     ADD CONSTRAINT <partition>_frozen CHECK (<the purge's condition, its cutoffs
//     written as literals>) NOT VALID, which locks the partition ACCESS EXCLUSIVE, then
//     three probes (LIMIT 1), each along an index of the partition, for a row that breaks
//     the condition (pending, WAITING, finished after its cutoff). A row found rolls the
//     transaction back, and the partition is kept. Otherwise the commit leaves the
//     constraint, which every later INSERT or UPDATE of the partition's rows must pass:
//     a replay of one of them fails with SQLSTATE 23514 instead of its row being dropped.
//  2. ALTER TABLE <table> DETACH PARTITION <partition> CONCURRENTLY (not in a
//     transaction), which waits for the transactions that may use the partition and
//     locks the table SHARE UPDATE EXCLUSIVE only.
//  3. DROP TABLE <partition>, which no query of the table can reach any more.
//
// A detach that stopped half-way (a canceled statement) leaves the partition pending;
// the next run completes it with DETACH PARTITION … FINALIZE, then drops it.

// DefaultPartitionLockTimeout bounds the lock waits of MaintainPartitions's ALTER
// statements (the freeze, the ATTACH of a new partition).
const DefaultPartitionLockTimeout = time.Second

// PartitionMaintenance configures [MaintainPartitions].
type PartitionMaintenance struct {
	// Config is the table's layout: the periods ahead to create.
	Config PartitionConfig
	// Now is the current time, whose period and the Config.Ahead after it must have
	// partitions. Defaults to time.Now().
	Now time.Time
	// Purge holds the regular purge's cutoffs (Before, DeadBefore, UndeliveredBefore;
	// Limit is not used): a partition is dropped when that purge would delete each of
	// its rows. Only partitions whose period ended by Purge.Before and before the
	// current period are looked at. Required.
	Purge storage.PurgeParams
	// LockTimeout bounds the wait for each ALTER's lock; a partition whose freeze times
	// out is reported Busy and tried again at the next run. Defaults to
	// DefaultPartitionLockTimeout.
	LockTimeout time.Duration
	// StepTimeout bounds each step on one partition (its create, freeze, detach or
	// drop). A detach it cancels is left pending, and the next run finishes it. Zero:
	// no bound.
	StepTimeout time.Duration
}

// PartitionReport says what one [MaintainPartitions] did, by partition name.
type PartitionReport struct {
	Created []string // new partitions, attached
	Dropped []string // old partitions, detached and dropped
	Kept    []string // old partitions that hold a row the purge would keep
	Busy    []string // old partitions whose freeze did not get its lock in time
	// Skipped is set when another process maintained the table at the time (its
	// session-level advisory lock was taken): the run did nothing.
	Skipped bool
	// Steps are the statements' times, in order.
	Steps []PartitionStep
}

// PartitionStep is how long one step of [MaintainPartitions] took on one partition:
// "create" (CREATE TABLE, its indexes and the ATTACH, one transaction), "freeze" (the
// constraint and the probes, one transaction), "detach" (DETACH … CONCURRENTLY or
// FINALIZE) or "drop".
type PartitionStep struct {
	Partition, Step string
	Took            time.Duration
}

// record adds a step that started at start.
func (r *PartitionReport) record(partition, step string, start time.Time) {
	r.Steps = append(r.Steps, PartitionStep{Partition: partition, Step: step, Took: time.Since(start)})
}

// MaintainPartitions creates the missing partitions of the partitioned outbox table
// named table, from the period of m.Now to m.Config.Ahead periods after it, then drops
// each old partition whose rows the purge of m.Purge would all delete (see the steps
// above). It returns what it did so far and an error on the first failure other than
// a lock timeout. A table that is not partitioned returns a *[ConfigError].
func MaintainPartitions(ctx context.Context, db *sql.DB, d *Dialect, table string, m PartitionMaintenance) (PartitionReport, error) {
	t, err := parseTableName(table)
	if err != nil {
		return PartitionReport{}, err
	}
	return maintainPartitions(ctx, db, d, t, m)
}

// maintainPartitions is MaintainPartitions of t.
func maintainPartitions(ctx context.Context, db *sql.DB, d *dialect, t tableName, m PartitionMaintenance) (PartitionReport, error) {
	var rep PartitionReport
	cfg, err := m.Config.withDefaults()
	if err != nil {
		return rep, err
	}
	if m.Purge.Before.IsZero() {
		return rep, &outboxtype.ConfigError{Field: "Purge.Before", Reason: "zero"}
	}
	if m.Now.IsZero() {
		m.Now = time.Now()
	}
	if m.LockTimeout <= 0 {
		m.LockTimeout = DefaultPartitionLockTimeout
	}
	if d != postgresDialect {
		return rep, &outboxtype.ConfigError{Field: "Dialect", Reason: "a partitioned table needs PostgreSQL"}
	}
	if part, err := isPartitioned(ctx, db, d, t); err != nil || !part {
		return rep, errors.Join(err, notPartitioned(t, err))
	}
	// One maintainer at a time: two would both try to create the same partition, or to
	// detach the same one.
	conn, err := db.Conn(ctx)
	if err != nil {
		return rep, err
	}
	defer conn.Close()
	lockKey := "outbox partitions " + d.qualified(t)
	var locked bool
	if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock(hashtextextended($1, 0))", lockKey).Scan(&locked); err != nil {
		return rep, fmt.Errorf("maintain partitions: lock: %w", err)
	}
	if !locked {
		rep.Skipped = true
		return rep, nil
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := conn.ExecContext(uctx, "SELECT pg_advisory_unlock(hashtextextended($1, 0))", lockKey); err != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // closing the session ends its lock
		}
	}()
	// The partitions ahead first: the writes need them, and a detach that another
	// transaction holds up (below) must not keep them from being made. PostgreSQL
	// attaches a partition beside one whose detach is pending.
	if rep.Created, err = ensurePartitions(ctx, db, d, t, cfg, m.Now, m.LockTimeout, m.StepTimeout, &rep); err != nil {
		return rep, err
	}
	if err := finishDetaches(ctx, db, d, t, m.StepTimeout, &rep); err != nil {
		return rep, err
	}
	parts, err := partitions(ctx, db, d, t)
	if err != nil {
		return rep, err
	}
	current := cfg.periodStart(m.Now)
	for _, p := range parts {
		end, ok := p.end()
		if !ok || p.detaching || end.After(current) || end.After(m.Purge.Before) {
			continue
		}
		start := time.Now()
		sctx, cancel := stepContext(ctx, m.StepTimeout)
		frozen, err := freezePartition(sctx, db, d, p.table, m.Purge, m.LockTimeout)
		cancel()
		rep.record(p.table.name, "freeze", start)
		switch {
		case isLockTimeout(err):
			rep.Busy = append(rep.Busy, p.table.name)
			continue
		case err != nil:
			return rep, err
		case !frozen:
			rep.Kept = append(rep.Kept, p.table.name)
			continue
		}
		if err := dropPartition(ctx, db, d, t, p.table, false, m.StepTimeout, &rep); err != nil {
			return rep, err
		}
		rep.Dropped = append(rep.Dropped, p.table.name)
	}
	return rep, nil
}

// stepContext bounds one step of the maintenance by timeout, when positive.
func stepContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, timeout)
}

// notPartitioned is the error of MaintainPartitions on a table that is not
// partitioned, nil when err, the catalog's, is set.
func notPartitioned(t tableName, err error) error {
	if err != nil {
		return nil
	}
	return &outboxtype.ConfigError{Field: "Table", Reason: fmt.Sprintf("%s is not a partitioned table", t)}
}

// finishDetaches completes the detach of the partitions of t that one left pending, and
// drops them.
func finishDetaches(ctx context.Context, db *sql.DB, d *dialect, t tableName, stepTimeout time.Duration, rep *PartitionReport) error {
	parts, err := partitions(ctx, db, d, t)
	if err != nil {
		return err
	}
	for _, p := range parts {
		if !p.detaching {
			continue
		}
		if err := dropPartition(ctx, db, d, t, p.table, true, stepTimeout, rep); err != nil {
			return err
		}
		rep.Dropped = append(rep.Dropped, p.table.name)
	}
	orphans, err := detachedPartitions(ctx, db, d, t)
	if err != nil {
		return err
	}
	for _, pt := range orphans {
		start := time.Now()
		sctx, cancel := stepContext(ctx, stepTimeout)
		_, err := db.ExecContext(sctx, "DROP TABLE "+d.qualified(pt))
		cancel()
		if err != nil {
			return fmt.Errorf("drop detached partition %s: %w", pt, err)
		}
		rep.record(pt.name, "drop", start)
		rep.Dropped = append(rep.Dropped, pt.name)
	}
	return nil
}

// detachedPartitions lists the tables a maintenance of t detached and did not drop (its
// DROP failed, or the process ended in between): tables of t's schema that are no
// partition, named as a partition of t is, with the frozen constraint of their name,
// which only a freeze adds.
func detachedPartitions(ctx context.Context, db *sql.DB, d *dialect, t tableName) ([]tableName, error) {
	rows, err := db.QueryContext(ctx, "SELECT c.relname, k.conname FROM pg_class c JOIN pg_constraint k ON k.conrelid = c.oid"+
		" WHERE c.relnamespace = (SELECT relnamespace FROM pg_class WHERE oid = to_regclass($1))"+
		" AND c.relkind = 'r' AND NOT c.relispartition AND k.contype = 'c'", d.qualified(t))
	if err != nil {
		return nil, fmt.Errorf("look for detached partitions of %s: %w", t, err)
	}
	defer rows.Close()
	var out []tableName
	for rows.Next() {
		var name, check string
		if err := rows.Scan(&name, &check); err != nil {
			return nil, fmt.Errorf("look for detached partitions of %s: %w", t, err)
		}
		pt := tableName{schema: t.schema, name: name}
		if check == frozenCheck(pt) && isPartitionName(t, name) {
			out = append(out, pt)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("look for detached partitions of %s: %w", t, err)
	}
	return out, nil
}

// isPartitionName reports whether name is one that partitionTable or
// convertedPartition gives a partition of t.
func isPartitionName(t tableName, name string) bool {
	if name == convertedPartition(t).name {
		return true
	}
	const layout = "200601021504"
	if len(name) < len(layout) {
		return false
	}
	start, err := time.Parse(layout, name[len(name)-len(layout):])
	return err == nil && partitionTable(t, start).name == name
}

// frozenCheck is the name of the constraint that freezes partition pt.
func frozenCheck(pt tableName) string { return pt.indexName("_frozen") }

// purgeableCondition is the purge's condition of p, with its cutoffs as literals: the
// rows of it that Purge deletes (purgeQuery, purgeUndeliveredQuery).
func purgeableCondition(p storage.PurgeParams) string {
	before, dead := pgTimeLiteral(p.Before), pgTimeLiteral(p.Before)
	if !p.DeadBefore.IsZero() {
		dead = pgTimeLiteral(p.DeadBefore)
	}
	done := sqlStatus(outboxtype.StatusDone)
	cond := "status = " + done + " AND " + finishedAt + " < " + before +
		" OR (" + finishedStatus() + ") AND status <> " + done + " AND " + finishedAt + " < " + dead
	if !p.UndeliveredBefore.IsZero() {
		cond += " OR status IN (" + sqlStatuses(outboxtype.StatusNew, outboxtype.StatusRetry, outboxtype.StatusWaiting) +
			") AND created_at < " + pgTimeLiteral(p.UndeliveredBefore)
	}
	return cond
}

// keptRowsQuery reports whether partition pt holds a row that the purge of p keeps: one
// probe along each partial index of the partition, the pending one, the state one
// (WAITING rows) and the finished one, from the earlier cutoff on. The statuses 0 to 4
// and 5 and above are all covered. Each probe is a scalar subquery in its index's
// order with LIMIT 1, not an EXISTS: the planner drops an EXISTS's ORDER BY, and
// without statistics on the cutoffs (a new partition) it estimated a third of the
// finished rows to match and read the partition whole (Seq Scan) rather than the
// index, under the freeze's ACCESS EXCLUSIVE lock.
func keptRowsQuery(d *dialect, pt tableName, p storage.PurgeParams) string {
	table := d.qualified(pt)
	before, dead := pgTimeLiteral(p.Before), pgTimeLiteral(p.Before)
	first := p.Before
	if !p.DeadBefore.IsZero() {
		dead = pgTimeLiteral(p.DeadBefore)
		if p.DeadBefore.Before(first) {
			first = p.DeadBefore
		}
	}
	done := sqlStatus(outboxtype.StatusDone)
	undelivered := ""
	if !p.UndeliveredBefore.IsZero() {
		undelivered = " AND created_at >= " + pgTimeLiteral(p.UndeliveredBefore)
	}
	probe := func(where, order string) string {
		return "(SELECT 1 FROM " + table + " WHERE " + where + " ORDER BY " + order + " LIMIT 1) IS NOT NULL"
	}
	return "SELECT " + probe("status IN ("+pendingStatuses()+")"+undelivered, "created_at, event_id") +
		" OR " + probe("status = "+sqlStatus(outboxtype.StatusWaiting)+" AND created_at IS NOT NULL"+undelivered, "status, created_at, event_id") +
		" OR " + probe("("+finishedStatus()+") AND "+finishedAt+" >= "+pgTimeLiteral(first)+
		" AND (status = "+done+" AND "+finishedAt+" >= "+before+" OR status <> "+done+" AND "+finishedAt+" >= "+dead+")",
		finishedAt+", event_id")
}

// pgTimeLiteral writes t as a timestamptz literal, truncated to microseconds as the
// stored times are.
func pgTimeLiteral(t time.Time) string {
	return "TIMESTAMPTZ '" + utcMicro(t).Format("2006-01-02 15:04:05.000000") + "+00'"
}

// freezePartition adds partition pt's frozen constraint with p's cutoffs and keeps it
// when no row of pt breaks it (true), or rolls back (false). lockTimeout bounds the
// ALTER's wait for its ACCESS EXCLUSIVE lock, which then holds every statement that
// reads pt (a poll of the whole table) until the probes are done.
func freezePartition(ctx context.Context, db *sql.DB, d *dialect, pt tableName, p storage.PurgeParams, lockTimeout time.Duration) (frozen bool, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("freeze partition %s: %w", pt, err)
	}
	defer func() {
		if err != nil || !frozen {
			err = errors.Join(err, ignoreDone(tx.Rollback()))
		}
		if err != nil {
			err = fmt.Errorf("freeze partition %s: %w", pt, err)
		}
	}()
	check := d.quote(frozenCheck(pt))
	for _, s := range []string{
		fmt.Sprintf("SET LOCAL lock_timeout = %d", lockTimeout.Milliseconds()),
		// A constraint of an earlier run (whose detach did not happen) has older cutoffs.
		"ALTER TABLE " + d.qualified(pt) + " DROP CONSTRAINT IF EXISTS " + check,
		"ALTER TABLE " + d.qualified(pt) + " ADD CONSTRAINT " + check + " CHECK (" + purgeableCondition(p) + ") NOT VALID",
	} {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return false, err
		}
	}
	var kept bool
	if err := tx.QueryRowContext(ctx, keptRowsQuery(d, pt, p)).Scan(&kept); err != nil {
		return false, err
	}
	if kept {
		return false, nil
	}
	return true, tx.Commit()
}

// dropPartition detaches partition pt from t, CONCURRENTLY or, when pending (a detach
// left half-way), with FINALIZE, then drops it, each under its own stepTimeout.
func dropPartition(ctx context.Context, db *sql.DB, d *dialect, t, pt tableName, pending bool, stepTimeout time.Duration, rep *PartitionReport) error {
	how := " CONCURRENTLY"
	if pending {
		how = " FINALIZE"
	}
	start := time.Now()
	sctx, cancel := stepContext(ctx, stepTimeout)
	_, err := db.ExecContext(sctx, "ALTER TABLE "+d.qualified(t)+" DETACH PARTITION "+d.qualified(pt)+how)
	cancel()
	if err != nil {
		return fmt.Errorf("detach partition %s: %w", pt, err)
	}
	rep.record(pt.name, "detach", start)
	start = time.Now()
	sctx, cancel = stepContext(ctx, stepTimeout)
	defer cancel()
	if _, err := db.ExecContext(sctx, "DROP TABLE "+d.qualified(pt)); err != nil {
		return fmt.Errorf("drop partition %s: %w", pt, err)
	}
	rep.record(pt.name, "drop", start)
	return nil
}

// isLockTimeout reports PostgreSQL's lock_timeout (SQLSTATE 55P03).
func isLockTimeout(err error) bool {
	return err != nil && strings.Contains(err.Error(), "SQLSTATE 55P03")
}

// periodOf is the period of ps's partitions: that of the newest partition whose bounds
// are a period's, false when none is.
func (ps *partitionSet) periodOf() (time.Duration, bool) {
	for i := len(ps.parts) - 1; i >= 0; i-- {
		if start, end, ok := ps.parts[i].period(); ok && checkPeriod(end.Sub(start)) == nil {
			return end.Sub(start), true
		}
	}
	return 0, false
}

// partitionsNow reads whether the store's table is partitioned, and its partitions,
// keeps them for the writes (checkPartitions), and returns them.
func (s *Store) partitionsNow(ctx context.Context) (*partitionSet, error) {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	ps, err := s.loadPartitions(ctx, s.db)
	if err != nil {
		return nil, err
	}
	s.parts.Store(ps)
	return ps, nil
}

// MaintainPartitions is the purger's partition maintenance (purge.PartitionMaintainer):
// on a partitioned outbox table (PostgreSQL) it runs MaintainPartitions with the
// purge's cutoffs p at now, enough periods ahead to cover cover (the time to the
// purger's next runs; at least the default 3 periods), each step bounded by the
// store's QueryTimeout, and returns the partitions it created, dropped, and could not
// freeze in time (busy). The period is that of the table's newest partition. On any
// other table it does nothing. Purge then deletes the purgeable rows of the old
// partitions it kept (purgeRange).
func (s *Store) MaintainPartitions(ctx context.Context, now time.Time, p storage.PurgeParams, cover time.Duration) (created, dropped, busy []string, err error) {
	if s.d != postgresDialect {
		return nil, nil, nil, nil
	}
	ps, err := s.partitionsNow(ctx)
	if err != nil || !ps.partitioned {
		return nil, nil, nil, err
	}
	period, ok := ps.periodOf()
	if !ok {
		return nil, nil, nil, fmt.Errorf("maintain partitions: %s has no partition of a period (MigratePartitionedTable makes them)", s.table)
	}
	ahead := defaultPartitionsAhead
	if n := int((cover + period - 1) / period); n > ahead {
		ahead = n
	}
	m := PartitionMaintenance{Config: PartitionConfig{Period: period, Ahead: ahead}, Now: now, Purge: p}
	if s.timeout > 0 {
		m.StepTimeout = s.timeout
	}
	rep, err := maintainPartitions(ctx, s.db, s.d, s.table, m)
	if _, rerr := s.partitionsNow(ctx); rerr != nil && err == nil {
		err = rerr
	}
	return rep.Created, rep.Dropped, rep.Busy, err
}

// purgeRange is the part of the IDs that Purge deletes from: on a partitioned table,
// the partitions whose period ended before the period of p.Before starts (those
// MaintainPartitions drops whole, or keeps for a row the purge keeps), and the IDs
// after the last period's partition (ranges of the user's: IDs that are not ULIDs).
// Deleting the rows of newer partitions one by one would leave partitions for
// MaintainPartitions with nothing to drop. On any other table it is every ID.
func (s *Store) purgeRange(ctx context.Context, p storage.PurgeParams) (idRange, error) {
	if s.d != postgresDialect {
		return idRange{}, nil
	}
	ps := s.parts.Load()
	if ps == nil {
		var err error
		if ps, err = s.partitionsNow(ctx); err != nil {
			return idRange{}, err
		}
	}
	if !ps.partitioned {
		return idRange{}, nil
	}
	period, ok := ps.periodOf()
	if !ok {
		return idRange{}, nil // no periods: the ranges are the user's; every ID
	}
	ids := idRange{below: lowestID(PartitionConfig{Period: period}.periodStart(p.Before))}
	for _, pt := range ps.parts {
		if _, end, ok := pt.period(); ok && lowestID(end) > ids.from {
			ids.from = lowestID(end)
		}
	}
	return ids, nil
}
