package pgnotify_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/outboxkit/outbox/adapters/pgnotify"
	outbox "github.com/outboxkit/outbox/core"
)

func TestNewValidates(t *testing.T) {
	t.Parallel()
	const dsn = "postgres://app@127.0.0.1:1/app" // nothing listens on port 1: New connects nothing
	tests := []struct {
		name  string
		cfg   pgnotify.Config
		field string // "" when New must succeed
	}{
		{"URL DSN, default channel", pgnotify.Config{DSN: dsn}, ""},
		{"key=value DSN", pgnotify.Config{DSN: "host=127.0.0.1 port=1 user=app dbname=app"}, ""},
		{"ListenDSN", pgnotify.Config{DSN: dsn, ListenDSN: "postgres://app@127.0.0.2:1/app"}, ""},
		{"channel of 63 bytes", pgnotify.Config{DSN: dsn, Channel: strings.Repeat("c", 63)}, ""},
		{"channel that needs quoting", pgnotify.Config{DSN: dsn, Channel: `Billing."Outbox" event`}, ""},
		{"empty DSN", pgnotify.Config{Channel: "orders"}, "pgnotify.Config.DSN"},
		{"bad DSN", pgnotify.Config{DSN: "postgres://app@127.0.0.1:notaport/app"}, "pgnotify.Config.DSN"},
		{"bad key=value DSN", pgnotify.Config{DSN: "host=127.0.0.1 port"}, "pgnotify.Config.DSN"},
		{"bad ListenDSN", pgnotify.Config{DSN: dsn, ListenDSN: "postgres://app@127.0.0.1:notaport/app"}, "pgnotify.Config.ListenDSN"},
		{"channel of 64 bytes", pgnotify.Config{DSN: dsn, Channel: strings.Repeat("c", 64)}, "pgnotify.Config.Channel"},
		{"channel with a NUL byte", pgnotify.Config{DSN: dsn, Channel: "orders\x00"}, "pgnotify.Config.Channel"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n, err := pgnotify.New(tt.cfg)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if err := n.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				return
			}
			var ce *outbox.ConfigError
			if !errors.As(err, &ce) || ce.Field != tt.field {
				t.Fatalf("New: got %v, want a *outbox.ConfigError on %s", err, tt.field)
			}
			if !errors.Is(err, outbox.ErrInvalidConfig) {
				t.Fatalf("New: %v does not match outbox.ErrInvalidConfig", err)
			}
			if n != nil {
				t.Fatalf("New returned a Notifier with the error %v", err)
			}
		})
	}
}

func TestNewRedactsPassword(t *testing.T) {
	t.Parallel()
	_, err := pgnotify.New(pgnotify.Config{DSN: "postgres://app:s3cret@127.0.0.1:notaport/app"})
	if err == nil {
		t.Fatal("New accepted a bad port")
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("the error shows the password: %v", err)
	}
}

func TestNotifyAfterClose(t *testing.T) {
	t.Parallel()
	n, err := pgnotify.New(pgnotify.Config{DSN: "postgres://app@127.0.0.1:1/app"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // Close is idempotent
		if err := n.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	if err := n.Notify(context.Background()); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Notify after Close: got %v, want an error wrapping net.ErrClosed", err)
	}
}

// TestNotifyWakesListener: a notification of one Notifier wakes the Listen of another on
// the same channel, once per Notify, on a channel name that needs quoting.
func TestNotifyWakesListener(t *testing.T) {
	t.Parallel()
	b := setup(t)
	channel := b.channel + `: Wake "Me"` // mixed case, a space and quotes: LISTEN must quote it as pg_notify spells it
	listener := newNotifier(t, pgnotify.Config{DSN: b.dsn, Channel: channel})
	sender := newNotifier(t, pgnotify.Config{DSN: b.dsn, Channel: channel})
	l := listen(t, listener)
	l.wakes.waitAtLeast(t, "the wake after LISTEN", 1) // listening from now on
	ctx := context.Background()
	for i := range int64(3) {
		if err := sender.Notify(ctx); err != nil {
			t.Fatalf("Notify %d: %v", i+1, err)
		}
		l.wakes.waitAtLeast(t, "the wake of a notification", 2+i)
	}
	// The same name in other case, or without the suffix, is another channel: a
	// notification on it does not wake this listener. Notifications reach a listener in
	// the order they were committed, so had those woken it, their wakes would have come
	// before the last one's.
	for _, other := range []string{strings.ToLower(channel), b.channel} {
		o := newNotifier(t, pgnotify.Config{DSN: b.dsn, Channel: other})
		if err := o.Notify(ctx); err != nil {
			t.Fatalf("Notify on %q: %v", other, err)
		}
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := sender.Notify(ctx); err != nil {
		t.Fatal(err)
	}
	l.wakes.waitAtLeast(t, "the wake of the last notification", 5)
	if got := l.wakes.n.Load(); got != 5 {
		t.Fatalf("%d wakes, want 5: notifications on other channels woke the listener", got)
	}
}

// TestListenReturnsContextError: Listen returns ctx.Err() when its context ends, while
// waiting for notifications and before it has connected.
func TestListenReturnsContextError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	n := newNotifier(t, pgnotify.Config{DSN: b.dsn, Channel: b.channel})
	l := listen(t, n)
	l.wakes.waitAtLeast(t, "the wake after LISTEN", 1)
	l.cancel()
	if err := l.wait(t); err != context.Canceled {
		t.Fatalf("Listen after cancel: got %v, want context.Canceled", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := n.Listen(ctx, func() { t.Error("wake called with a cancelled context") }); err != context.Canceled {
		t.Fatalf("Listen with a cancelled context: got %v, want context.Canceled", err)
	}
}

// TestListenReturnsErrorWhenBackendTerminated: when its connection is terminated, Listen
// returns an error that is not a context's, so that the outbox listens again.
func TestListenReturnsErrorWhenBackendTerminated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	n := newNotifier(t, pgnotify.Config{DSN: b.dsn, Channel: b.channel})
	l := listen(t, n)
	l.wakes.waitAtLeast(t, "the wake after LISTEN", 1)
	// The listening connection has the default application_name and ran LISTEN on this
	// test's channel.
	if got := terminate(t, b.db, "outbox-pgnotify-listen", b.channel); got != 1 {
		t.Fatalf("terminated %d listening backends, want 1", got)
	}
	err := l.wait(t)
	if err == nil || isContextError(err) {
		t.Fatalf("Listen after its backend was terminated: got %v, want a connection error", err)
	}
	t.Logf("Listen returned: %v", err)
}

// TestNotifyReconnects: after its connection was terminated, the next Notify opens a new
// one and the notification arrives.
func TestNotifyReconnects(t *testing.T) {
	t.Parallel()
	b := setup(t)
	appName := "pgnotify-test-" + strings.TrimPrefix(strings.Split(b.table, ".")[0], "outbox_test_")
	sender := newNotifier(t, pgnotify.Config{DSN: withAppName(t, b.dsn, appName), Channel: b.channel})
	listener := newNotifier(t, pgnotify.Config{DSN: b.dsn, Channel: b.channel})
	l := listen(t, listener)
	l.wakes.waitAtLeast(t, "the wake after LISTEN", 1)
	ctx := context.Background()
	if err := sender.Notify(ctx); err != nil {
		t.Fatalf("first Notify: %v", err)
	}
	l.wakes.waitAtLeast(t, "the first notification", 2)
	before := backendPIDs(t, b.db, appName)
	if len(before) != 1 {
		t.Fatalf("backends of the Notify connection: %v, want one", before)
	}
	if got := terminate(t, b.db, appName, "pg_notify"); got != 1 {
		t.Fatalf("terminated %d notify backends, want 1", got)
	}
	// The terminated connection fails; Notify retries on a fresh one.
	if err := sender.Notify(ctx); err != nil {
		t.Fatalf("Notify after its backend was terminated: %v", err)
	}
	l.wakes.waitAtLeast(t, "the notification after the reconnection", 3)
	after := backendPIDs(t, b.db, appName)
	if len(after) != 1 || after[0] == before[0] {
		t.Fatalf("backends of the Notify connection: %v before, %v after; want one new one", before, after)
	}
}

// TestListenDSN: Listen connects with ListenDSN, not DSN.
func TestListenDSN(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// DSN points where nothing listens, as a pooler the listener must not use.
	n := newNotifier(t, pgnotify.Config{DSN: "postgres://app@127.0.0.1:1/app?connect_timeout=10", ListenDSN: b.dsn, Channel: b.channel})
	l := listen(t, n)
	l.wakes.waitAtLeast(t, "the wake after LISTEN", 1)
	sender := newNotifier(t, pgnotify.Config{DSN: b.dsn, Channel: b.channel})
	if err := sender.Notify(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.wakes.waitAtLeast(t, "the wake of a notification", 2)
	if err := n.Notify(context.Background()); err == nil {
		t.Fatal("Notify through an unreachable DSN succeeded: does it use ListenDSN?")
	}
}
