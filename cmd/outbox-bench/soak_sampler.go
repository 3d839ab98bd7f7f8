package main

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strings"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// soakSampler reads the outbox table's state for the soak workload, on a connection of
// its own.
type soakSampler struct {
	t  *target
	db *sql.DB
	// store is a second SQL store over the same table on the sampler's connection: its
	// Pending runs the statement the poller runs (the library's own query builder and
	// statement cache), which the benchmark could not otherwise reach, the builder being
	// internal.
	store storage.Store
	// noDBStat is set once SQLite's dbstat table turned out to be missing, after which
	// only the file's pages are read.
	noDBStat bool
	// statements is set on PostgreSQL once pg_stat_statements answered (see
	// startStatements); dropStatements when the sampler created the extension.
	statements, dropStatements bool
}

func newSoakSampler(ctx context.Context, t *target) (*soakSampler, error) {
	dsn := t.dsn
	if t.kind == "postgres" {
		dsn = withoutParallelQuery(dsn)
	}
	db, err := openPool(ctx, t.driver, dsn, 1)
	if err != nil {
		return nil, fmt.Errorf("the sampler's pool: %w", err)
	}
	store, err := outbox.NewSQLStore(db, t.dialect, outbox.SQLStoreConfig{Table: t.outboxTable()})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("the sampler's store: %w", err)
	}
	s := &soakSampler{t: t, db: db, store: store}
	if t.kind == "postgres" {
		if err := s.startStatements(ctx); err != nil {
			progress("%s: soak: no server times of the poll statements (pg_stat_statements: %v); the client's times only", t.kind, err)
		}
	}
	return s, nil
}

func (s *soakSampler) close() {
	if s.dropStatements {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := s.db.ExecContext(ctx, "DROP EXTENSION IF EXISTS pg_stat_statements"); err != nil {
			progress("%s: soak: drop the pg_stat_statements extension: %v", s.t.kind, err)
		}
	}
	s.db.Close()
}

// startStatements makes pg_stat_statements readable in the outbox's database, creating
// the extension there unless it exists (close drops it again), and clears its counts.
// It fails unless the server preloads the library (shared_preload_libraries), which the
// servers outbox-bench starts for a soak do.
func (s *soakSampler) startStatements(ctx context.Context) error {
	var exists bool
	if err := s.db.QueryRowContext(ctx, "SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'pg_stat_statements')").Scan(&exists); err != nil {
		return err
	}
	if !exists {
		if _, err := s.db.ExecContext(ctx, "CREATE EXTENSION pg_stat_statements"); err != nil {
			return err
		}
		s.dropStatements = true
	}
	if _, err := s.db.ExecContext(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
		return err
	}
	s.statements = true
	return nil
}

// pollOrder is the ORDER BY of the poller's reads and of the claims on PostgreSQL
// (core/internal/sqlstore's claimOrder), which tells their statements from the others
// in pg_stat_statements.
const pollOrder = "ORDER BY available_at, created_at, event_id"

// pollKinds is the order of the kinds of pollServerStats.
var pollKinds = []string{"mark", "head", "claim mark", "claim head"}

// pollKind is the kind of a poll statement's text: a claim (MultiNode) or a read, from
// the oldest pending row (the read's subquery of the earliest due time; a claim without
// a lower bound on available_at) or from the low-water mark.
func pollKind(query string) string {
	if strings.HasPrefix(query, "WITH claimed AS") {
		if strings.Contains(query, "available_at >= $") {
			return "claim mark"
		}
		return "claim head"
	}
	if strings.Contains(query, "MIN(available_at)") {
		return "head"
	}
	return "mark"
}

// pollServer returns what pg_stat_statements counted of the poll statements since the
// last call, and clears its counts (a statement that ends between the read and the
// clearing, well under a millisecond apart, goes uncounted). It fails when it finds
// none, which would mean that the statements' text changed beyond what pollKind and
// pollOrder know: the poller runs at least once a PollInterval, and the sampler's own
// two reads ran just before.
func (s *soakSampler) pollServer(ctx context.Context) ([]pollServerStats, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT query, calls, total_exec_time, max_exec_time, shared_blks_hit + shared_blks_read "+
		"FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND calls > 0 "+
		"AND query LIKE '%"+pollOrder+"%'")
	if err != nil {
		return nil, err
	}
	byKind := make(map[string]*pollServerStats)
	for rows.Next() {
		var query string
		var calls, buffers int64
		var total, maxMS float64
		if err := rows.Scan(&query, &calls, &total, &maxMS, &buffers); err != nil {
			rows.Close()
			return nil, err
		}
		kind := pollKind(query)
		st := byKind[kind]
		if st == nil {
			st = &pollServerStats{Kind: kind}
			byKind[kind] = st
		}
		// Sums until the end, then the means.
		st.Calls += calls
		st.MeanMS += total
		st.MaxMS = max(st.MaxMS, maxMS)
		st.Buffers += float64(buffers)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if _, err := s.db.ExecContext(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
		return nil, err
	}
	var out []pollServerStats
	for _, kind := range pollKinds {
		if st := byKind[kind]; st != nil {
			st.MeanMS = math.Round(st.MeanMS/float64(st.Calls)*1000) / 1000
			st.MaxMS = math.Round(st.MaxMS*1000) / 1000
			st.Buffers = math.Round(st.Buffers/float64(st.Calls)*10) / 10
			out = append(out, *st)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no statement with %q in pg_stat_statements", pollOrder)
	}
	return out, nil
}

// withoutParallelQuery returns the PostgreSQL DSN dsn (a URL or key=value pairs, as pgx
// reads them) with max_parallel_workers_per_gather=0 as a run-time parameter of the
// sampler's connection. Its row count reads the whole table, which PostgreSQL otherwise
// runs with two parallel workers: on a machine of two cores that took every core for up
// to half a second at each sample, and the producers' and the poll statement's times in
// that instant were the sampler's own doing (auto_explain, 2026-11-30: 470 ms counts
// beside 100 ms single-row INSERTs, at the sample's second).
func withoutParallelQuery(dsn string) string {
	const param = "max_parallel_workers_per_gather"
	if strings.Contains(dsn, "://") {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		return dsn + sep + param + "=0"
	}
	return dsn + " " + param + "=0"
}

// read fills smp's table fields: rows per status, sizes, PostgreSQL's counters and one
// poll statement. Each read is bounded by timeout; a failed one is recorded in
// smp.Errors and leaves its fields zero, so that one slow read does not end the run.
func (s *soakSampler) read(ctx context.Context, smp *soakSample, pollBatch int, timeout time.Duration) {
	step := func(what string, fn func(ctx context.Context) error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		if err := fn(ctx); err != nil {
			smp.Errors = append(smp.Errors, what+": "+err.Error())
		}
	}
	// The poll statement first: after the count, which reads every row, it was timed
	// in the wake of the sampler's own full read (and, before withoutParallelQuery,
	// of its parallel workers).
	s.poll(ctx, smp, pollBatch, timeout)
	if s.statements {
		step("pg_stat_statements", func(ctx context.Context) error {
			var err error
			smp.PollServer, err = s.pollServer(ctx)
			return err
		})
	}
	step("count", func(ctx context.Context) error {
		began := time.Now()
		rows, err := s.countByStatus(ctx)
		smp.CountMS = ms(time.Since(began))
		smp.Rows = rows
		return err
	})
	step("sizes", func(ctx context.Context) error {
		began := time.Now()
		sizes, err := s.readSizes(ctx)
		smp.SizeMS = ms(time.Since(began))
		smp.Sizes = sizes
		return err
	})
	if s.t.kind == "postgres" {
		step("pg_stat_user_tables", func(ctx context.Context) error {
			var st pgTableStats
			// Summed over the partitions of a partitioned table; a dropped partition's
			// counts go with it.
			err := s.db.QueryRowContext(ctx, "SELECT COALESCE(SUM(n_dead_tup), 0), COALESCE(SUM(n_live_tup), 0), "+
				"COALESCE(SUM(autovacuum_count), 0), COALESCE(SUM(autoanalyze_count), 0) FROM pg_stat_user_tables "+
				"WHERE relid IN "+pgLeaves("CAST($1 AS regclass)"), s.t.quoteIdent(s.t.outboxTable())).
				Scan(&st.DeadTuples, &st.LiveTuples, &st.Autovacuums, &st.Autoanalyzes)
			if err == nil {
				smp.PG = &st
			}
			return err
		})
	}
}

// poll times one execution of the poller's statement into smp.PollMS.
func (s *soakSampler) poll(ctx context.Context, smp *soakSample, pollBatch int, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The poller's first read of a cycle: due NEW and RETRY rows older than SkipRecent,
	// oldest first, at most a poll batch (SkipRecent at the library's default, as the
	// soak's outbox has it; the batch is -poll-batch or the default).
	began := time.Now()
	b, err := s.store.Pending(ctx, storage.PendingParams{Now: began, SkipRecent: outbox.DefaultSkipRecent, Limit: pollBatch})
	smp.PollMS = ms(time.Since(began))
	smp.PollRows = len(b.Events) + len(b.Undecodable)
	if err != nil {
		smp.Errors = append(smp.Errors, "poll: "+err.Error())
	}
	// The same from the low-water mark (core/internal/poll/lowwater.go: SkipRecent and
	// lowWaterMargin, 10 s, behind the cycle's start).
	began = time.Now()
	mark := outbox.Cursor{AvailableAt: began.Add(-outbox.DefaultSkipRecent - 10*time.Second)}
	if _, err := s.store.Pending(ctx, storage.PendingParams{Now: began, SkipRecent: outbox.DefaultSkipRecent, Limit: pollBatch, After: mark}); err != nil {
		smp.Errors = append(smp.Errors, "poll from the low-water mark: "+err.Error())
	}
	smp.PollLowMS = ms(time.Since(began))
}

// countByStatus counts the rows per status. It reads every row of the table (no index
// holds every status), which costs about as much as the table is large: at the soak's
// steady state that is the rate times the retention plus up to a purge interval, some
// 70,000 rows at the defaults, a few milliseconds to tens of milliseconds.
func (s *soakSampler) countByStatus(ctx context.Context) (map[string]int64, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT status, COUNT(*) FROM "+s.t.quoteIdent(s.t.outboxTable())+" GROUP BY status")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[string]int64)
	for rows.Next() {
		var st int
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			return nil, err
		}
		out[outbox.Status(st).String()] = n
	}
	return out, rows.Err()
}

// readSizes returns the outbox table's relations and their sizes on disk.
//
// PostgreSQL: pg_relation_size of the heap (main fork) and of each index, and
// pg_total_relation_size of the TOAST table (with its index); exact, read from the files;
// on a partitioned table, the sums over its partitions.
// MariaDB: information_schema.TABLES' data_length (the clustered primary key, i.e. the
// rows), index_length and data_free, and each index's size in pages from
// mysql.innodb_index_stats; both come from InnoDB's persistent statistics, which are
// recalculated in the background after about 10 % of the rows changed, so they lag and
// move in steps. SQLite: the pages of the table and of each index from the dbstat
// virtual table (it reads every page of the database), and the file's page_count and
// freelist_count; without dbstat, the file's pages alone.
func (s *soakSampler) readSizes(ctx context.Context) ([]relationSize, error) {
	switch s.t.kind {
	case "postgres":
		return s.postgresSizes(ctx)
	case "mysql":
		return s.mysqlSizes(ctx)
	case "sqlite":
		return s.sqliteSizes(ctx)
	}
	return nil, fmt.Errorf("unknown database %q", s.t.kind)
}

// pgLeaves is a subquery of the relations that hold the rows of rel, a regclass
// expression: the leaf partitions of a partitioned table or index, or rel itself.
// pg_partition_tree returns no row at all for a relation outside a partition tree
// (PostgreSQL 15), so summing over it alone read 0 bytes for a plain table.
func pgLeaves(rel string) string {
	return "(SELECT relid FROM pg_partition_tree(" + rel + ") WHERE isleaf UNION ALL SELECT " + rel +
		" WHERE NOT EXISTS (SELECT FROM pg_partition_tree(" + rel + ")))"
}

func (s *soakSampler) postgresSizes(ctx context.Context) ([]relationSize, error) {
	table := s.t.quoteIdent(s.t.outboxTable())
	var heap, toast int64
	// A partitioned table's sizes are its partitions', an index's those of its
	// partitions' indexes.
	err := s.db.QueryRowContext(ctx, "SELECT COALESCE(SUM(pg_relation_size(c.oid)), 0), "+
		"COALESCE(SUM(COALESCE(pg_total_relation_size(NULLIF(c.reltoastrelid, 0)), 0)), 0) "+
		"FROM pg_class c WHERE c.oid IN "+pgLeaves("CAST($1 AS regclass)"), table).Scan(&heap, &toast)
	if err != nil {
		return nil, err
	}
	out := []relationSize{{Name: "outbox_event", Kind: "heap", Bytes: heap}}
	rows, err := s.db.QueryContext(ctx, "SELECT ci.relname, (SELECT COALESCE(SUM(pg_relation_size(l.relid)), 0) "+
		"FROM "+pgLeaves("CAST(i.indexrelid AS regclass)")+" l (relid)) FROM pg_index i "+
		"JOIN pg_class ci ON ci.oid = i.indexrelid WHERE i.indrelid = CAST($1 AS regclass) ORDER BY ci.relname", table)
	if err != nil {
		return out, err
	}
	defer rows.Close()
	for rows.Next() {
		var r relationSize
		if err := rows.Scan(&r.Name, &r.Bytes); err != nil {
			return out, err
		}
		r.Kind = "index"
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return out, err
	}
	return append(out, relationSize{Name: "outbox_event", Kind: "toast", Bytes: toast}), nil
}

func (s *soakSampler) mysqlSizes(ctx context.Context) ([]relationSize, error) {
	var data, index, free int64
	err := s.db.QueryRowContext(ctx, "SELECT DATA_LENGTH, INDEX_LENGTH, DATA_FREE FROM information_schema.TABLES "+
		"WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'outbox_event'", s.t.schema).Scan(&data, &index, &free)
	if err != nil {
		return nil, err
	}
	out := []relationSize{{Name: "outbox_event", Kind: "heap", Bytes: data}, {Name: "all indexes", Kind: "index", Bytes: index},
		{Name: "outbox_event", Kind: "free", Bytes: free}}
	rows, err := s.db.QueryContext(ctx, "SELECT index_name, stat_value * @@innodb_page_size FROM mysql.innodb_index_stats "+
		"WHERE database_name = ? AND table_name = 'outbox_event' AND stat_name = 'size' AND index_name <> 'PRIMARY' ORDER BY index_name", s.t.schema)
	if err != nil {
		return out, fmt.Errorf("per index: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r relationSize
		if err := rows.Scan(&r.Name, &r.Bytes); err != nil {
			return out, err
		}
		r.Kind = "index"
		out = append(out, r)
	}
	return out, rows.Err()
}

func (s *soakSampler) sqliteSizes(ctx context.Context) ([]relationSize, error) {
	var out []relationSize
	if !s.noDBStat {
		rows, err := s.db.QueryContext(ctx, "SELECT d.name, m.type, SUM(d.pgsize) FROM dbstat d JOIN sqlite_schema m ON m.name = d.name "+
			"WHERE m.tbl_name = 'outbox_event' GROUP BY d.name, m.type ORDER BY m.type DESC, d.name")
		if err != nil && strings.Contains(err.Error(), "no such table") {
			s.noDBStat = true
		} else if err != nil {
			return nil, err
		} else {
			defer rows.Close()
			for rows.Next() {
				var r relationSize
				if err := rows.Scan(&r.Name, &r.Kind, &r.Bytes); err != nil {
					return nil, err
				}
				if r.Kind == "table" {
					r.Kind = "heap"
				}
				out = append(out, r)
			}
			if err := rows.Err(); err != nil {
				return nil, err
			}
		}
	}
	var pages, free, size int64
	for q, v := range map[string]*int64{"PRAGMA page_count": &pages, "PRAGMA freelist_count": &free, "PRAGMA page_size": &size} {
		if err := s.db.QueryRowContext(ctx, q).Scan(v); err != nil {
			return out, fmt.Errorf("%s: %w", q, err)
		}
	}
	return append(out, relationSize{Name: "database", Kind: "file", Bytes: pages * size},
		relationSize{Name: "database", Kind: "free", Bytes: free * size}), nil
}
