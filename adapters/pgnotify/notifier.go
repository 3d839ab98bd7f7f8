package pgnotify

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	outbox "github.com/outboxkit/outbox/core"
)

// closeTimeout bounds the goodbye message sent to the server when a connection closes.
const closeTimeout = 5 * time.Second

// Notifier sends and receives the outbox's wake-ups on one PostgreSQL channel. Create
// it with [New] and put it in [outbox.Config.Notifier]; the outbox calls its methods.
// It is safe for concurrent use.
type Notifier struct {
	notifyCfg *pgx.ConnConfig
	listenCfg *pgx.ConnConfig
	channel   string
	listenSQL string // LISTEN "<channel>"

	mu     sync.Mutex
	conn   *pgx.Conn // Notify's connection; nil until the first Notify and after an error
	closed bool
}

var _ outbox.Notifier = (*Notifier)(nil)

// Notify tells the processes listening on the channel that events may be due: it calls
// pg_notify with the channel and an empty payload on the Notifier's own connection,
// outside any transaction, opening the connection on first use. Calls are serialised.
//
// When the connection opened by an earlier call turns out to be broken (the server
// restarted, the backend was terminated, a pooler or firewall dropped it), Notify
// closes it and tries once more on a fresh connection within ctx, so a broken
// connection costs no notification. It returns the error of the last try, wrapped
// (wrapping ctx's error when ctx ended), or an error wrapping net.ErrClosed after
// [Notifier.Close].
func (n *Notifier) Notify(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return fmt.Errorf("pgnotify: notify: %w", net.ErrClosed)
	}
	reused := n.conn != nil
	broken, err := n.notify(ctx)
	if err != nil && reused && broken && ctx.Err() == nil {
		_, err = n.notify(ctx) // on a fresh connection
	}
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err() // what pgx says after a cancellation varies
		}
		return fmt.Errorf("pgnotify: notify: %w", err)
	}
	return nil
}

// notify sends one notification, connecting first if needed, and reports whether the
// connection broke. A broken connection is closed, and the next call opens a new one;
// after an error of the server's (the connection still works) it is kept. n.mu is held.
func (n *Notifier) notify(ctx context.Context) (broken bool, err error) {
	if n.conn == nil {
		c, err := pgx.ConnectConfig(ctx, n.notifyCfg)
		if err != nil {
			return false, fmt.Errorf("connect: %w", err)
		}
		n.conn = c
	}
	if _, err := n.conn.Exec(ctx, "SELECT pg_notify($1, '')", n.channel); err != nil {
		if n.conn.IsClosed() || ctx.Err() != nil {
			// A cancelled statement leaves the connection in an unknown state.
			closeConn(ctx, n.conn)
			n.conn = nil
			return true, err
		}
		return false, err
	}
	return false, nil
}

// Listen listens on the channel on a connection of its own and calls wake for each
// notification until ctx ends; then it closes the connection and returns ctx.Err(). It
// also calls wake once right after LISTEN succeeds: events committed before that may
// have been notified to nobody. When connecting, LISTEN or the connection fails, it
// returns the error, wrapped (the outbox then listens again after a back-off). Each
// call opens its own connection, so several may run at once.
func (n *Notifier) Listen(ctx context.Context, wake func()) error {
	conn, err := pgx.ConnectConfig(ctx, n.listenCfg)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("pgnotify: listen: connect: %w", err)
	}
	defer closeConn(ctx, conn)
	if _, err := conn.Exec(ctx, n.listenSQL); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("pgnotify: listen: %w", err)
	}
	wake()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("pgnotify: listen: wait for notification: %w", err)
		}
		wake()
	}
}

// Close closes the connection of [Notifier.Notify]; a later Notify returns an error
// wrapping net.ErrClosed. Stop the outbox first: its Stop may send a last
// notification. Close does not end a running [Notifier.Listen] (its ctx does). Calling
// Close again does nothing. It returns nil.
func (n *Notifier) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	if n.conn != nil {
		closeConn(context.Background(), n.conn)
		n.conn = nil
	}
	return nil
}

// closeConn closes c, sending the server a goodbye within closeTimeout even when ctx
// has ended, and waits until pgx has released the connection's resources (after a
// network error pgx closes it in a goroutine of its own), or until ctx ends.
func closeConn(ctx context.Context, c *pgx.Conn) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	_ = c.Close(cctx) // the connection is gone either way; nothing to report
	select {
	case <-c.PgConn().CleanupDone():
	case <-ctx.Done():
	}
}
