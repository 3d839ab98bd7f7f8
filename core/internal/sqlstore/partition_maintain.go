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
	// AfterFreeze, when set, runs after a partition's freeze committed and before its
	// detach: a test hook, for a write that races the drop.
	AfterFreeze func(partition string)
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
	var rep PartitionReport
	t, err := parseTableName(table)
	if err != nil {
		return rep, err
	}
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
	if err := finishDetaches(ctx, db, d, t, &rep); err != nil {
		return rep, err
	}
	if rep.Created, err = ensurePartitions(ctx, db, d, t, cfg, m.Now, m.LockTimeout, &rep); err != nil {
		return rep, err
	}
	parts, err := partitions(ctx, db, d, t)
	if err != nil {
		return rep, err
	}
	current := cfg.periodStart(m.Now)
	for _, p := range parts {
		_, end, ok := p.period()
		if !ok || end.After(current) || end.After(m.Purge.Before) {
			continue
		}
		start := time.Now()
		frozen, err := freezePartition(ctx, db, d, p.table, m.Purge, m.LockTimeout)
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
		if m.AfterFreeze != nil {
			m.AfterFreeze(p.table.name)
		}
		if err := dropPartition(ctx, db, d, t, p.table, false, &rep); err != nil {
			return rep, err
		}
		rep.Dropped = append(rep.Dropped, p.table.name)
	}
	return rep, nil
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
func finishDetaches(ctx context.Context, db *sql.DB, d *dialect, t tableName, rep *PartitionReport) error {
	parts, err := partitions(ctx, db, d, t)
	if err != nil {
		return err
	}
	for _, p := range parts {
		if !p.detaching {
			continue
		}
		if err := dropPartition(ctx, db, d, t, p.table, true, rep); err != nil {
			return err
		}
		rep.Dropped = append(rep.Dropped, p.table.name)
	}
	return nil
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
// left half-way), with FINALIZE, then drops it.
func dropPartition(ctx context.Context, db *sql.DB, d *dialect, t, pt tableName, pending bool, rep *PartitionReport) error {
	how := " CONCURRENTLY"
	if pending {
		how = " FINALIZE"
	}
	start := time.Now()
	if _, err := db.ExecContext(ctx, "ALTER TABLE "+d.qualified(t)+" DETACH PARTITION "+d.qualified(pt)+how); err != nil {
		return fmt.Errorf("detach partition %s: %w", pt, err)
	}
	rep.record(pt.name, "detach", start)
	start = time.Now()
	if _, err := db.ExecContext(ctx, "DROP TABLE "+d.qualified(pt)); err != nil {
		return fmt.Errorf("drop partition %s: %w", pt, err)
	}
	rep.record(pt.name, "drop", start)
	return nil
}

// isLockTimeout reports PostgreSQL's lock_timeout (SQLSTATE 55P03).
func isLockTimeout(err error) bool {
	return err != nil && strings.Contains(err.Error(), "SQLSTATE 55P03")
}
