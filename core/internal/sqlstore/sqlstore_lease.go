package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/outboxkit/outbox/core/internal/check"
	"github.com/outboxkit/outbox/core/storage"
)

var _ storage.LeaseStore = (*Store)(nil)

// AcquireLease implements [LeaseStore.AcquireLease]: an UPDATE that takes or renews the
// lease row, an INSERT of the row when the UPDATE found none to change (the first
// process on the table; the migration creates no row), and a read of the row, which
// decides. Each runs on its own under QueryTimeout.
func (s *Store) AcquireLease(ctx context.Context, p storage.LeaseParams) (storage.Lease, error) {
	if err := p.Validate(); err != nil {
		return storage.Lease{}, err
	}
	n, err := s.exec1(ctx, s.d.leaseAcquireQuery(s.table, p))
	if err != nil {
		return storage.Lease{}, s.leaseError(ctx, "acquire lease", err)
	}
	if n == 0 {
		// No row, or one held by another process (MySQL also counts a row whose values
		// did not change as 0): the INSERT changes nothing then.
		if _, err := s.exec1(ctx, s.d.leaseInsertQuery(s.table, p)); err != nil {
			return storage.Lease{}, s.leaseError(ctx, "acquire lease", err)
		}
	}
	l, now, err := s.readLease(ctx)
	if err != nil {
		return storage.Lease{}, s.leaseError(ctx, "acquire lease", err)
	}
	live := l.ExpiresAt.After(now)
	if p.Shared {
		l.Held = live && l.Shared
	} else {
		l.Held = live && !l.Shared && l.Holder == p.Holder
	}
	return l, nil
}

// readLease reads the lease row and the database's current time.
func (s *Store) readLease(ctx context.Context) (storage.Lease, time.Time, error) {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	q := s.d.leaseReadQuery(s.table)
	rows, err := s.on(s.db).QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return storage.Lease{}, time.Time{}, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return storage.Lease{}, time.Time{}, err
		}
		return storage.Lease{}, time.Time{}, errors.New("the lease row is missing")
	}
	var l storage.Lease
	var mode string
	var expires, now any
	if err := rows.Scan(&l.Holder, &mode, &expires, &now); err != nil {
		return storage.Lease{}, time.Time{}, err
	}
	if err := rows.Close(); err != nil {
		return storage.Lease{}, time.Time{}, err
	}
	switch mode {
	case leaseModeSingle:
	case leaseModeShared:
		l.Shared = true
	default:
		return storage.Lease{}, time.Time{}, fmt.Errorf("the lease row has holder_mode %q", mode)
	}
	e, err1 := s.d.decodeTime(expires)
	n, err2 := s.d.decodeTime(now)
	if err := errors.Join(err1, err2); err != nil {
		return storage.Lease{}, time.Time{}, err
	}
	l.ExpiresAt = e
	return l, n, nil
}

// ReleaseLease implements [LeaseStore.ReleaseLease].
func (s *Store) ReleaseLease(ctx context.Context, holder string) error {
	if holder == "" {
		return check.Invalid("release lease", "holder is empty")
	}
	if _, err := s.exec1(ctx, s.d.leaseReleaseQuery(s.table, holder)); err != nil {
		return s.leaseError(ctx, "release lease", err)
	}
	return nil
}

// leaseError wraps err of a lease statement; when the table has no lease table, the
// error matches errors.ErrUnsupported and names the migration.
func (s *Store) leaseError(ctx context.Context, what string, err error) error {
	return s.sideTableError(ctx, what, leaseTable(s.table), "holder", "lease", err)
}

// sideTableError wraps err of a statement on the table side beside the outbox table,
// which the migration named creates; when side lacks column (the table is missing),
// the error matches errors.ErrUnsupported and names the migration.
func (s *Store) sideTableError(ctx context.Context, what string, side tableName, column, migration string, err error) error {
	// A statement cut by its context is no missing table, and a stop must not wait for
	// the probe.
	if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", what, err)
	}
	// The probe outlives the statement's deadline, not a cancellation (a stop).
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaseProbeTimeout)
	defer cancel()
	defer context.AfterFunc(ctx, func() {
		if errors.Is(ctx.Err(), context.Canceled) {
			cancel()
		}
	})()
	if has, herr := hasColumn(cctx, s.db, s.d, side, column); herr == nil && !has {
		return fmt.Errorf("%s: %s has no table %s (run outbox.MigrateTable, or the migration %s from outbox.Migrations): %w (%w)",
			what, s.table, side, migration, errors.ErrUnsupported, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// leaseProbeTimeout bounds the catalog read that tells a missing lease or pause table
// from another error.
const leaseProbeTimeout = 5 * time.Second
