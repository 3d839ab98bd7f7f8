package outboxnats_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	_ "modernc.org/sqlite"

	outboxnats "github.com/outboxkit/outbox/adapters/nats"
	outbox "github.com/outboxkit/outbox/core"
)

// waitTimeout bounds every wait of these tests. It only turns a hang into a failure;
// it is not a claim about how fast anything is.
const waitTimeout = 30 * time.Second

// streamName is the stream every test creates, on the default subjects ("outbox.>").
const streamName = "OUTBOX"

// natsServer is a nats-server with JetStream running in the test process, its file
// storage in a temp dir of the test. It can be stopped and started again on the same
// port and store directory.
type natsServer struct {
	t    *testing.T
	opts server.Options // as first given, with Port set to the port it got

	mu  sync.Mutex
	srv *server.Server // nil while stopped
}

// startServer starts a nats-server with JetStream on a free loopback port; configure,
// when set, adjusts its options first. The server shuts down when the test ends.
func startServer(t *testing.T, configure func(*server.Options)) *natsServer {
	t.Helper()
	opts := server.Options{
		ServerName: "outboxnats-test",
		Host:       "127.0.0.1",
		Port:       -1,
		JetStream:  true,
		StoreDir:   t.TempDir(),
		NoLog:      true,
		NoSigs:     true,
	}
	if configure != nil {
		configure(&opts)
	}
	s := &natsServer{t: t, opts: opts}
	s.start()
	s.opts.Port = s.srv.Addr().(*net.TCPAddr).Port
	t.Cleanup(s.stop)
	return s
}

// start starts the server with s.opts.
func (s *natsServer) start() {
	s.t.Helper()
	opts := s.opts // NewServer fills in defaults; keep ours as given
	srv, err := server.NewServer(&opts)
	if err != nil {
		s.t.Fatalf("new nats-server: %v", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(waitTimeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		s.t.Fatalf("nats-server not ready within %s", waitTimeout)
	}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
}

// stop shuts the server down and waits until it is down; it does nothing when the
// server is stopped.
func (s *natsServer) stop() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

// restart starts the stopped server again on its port and store directory.
func (s *natsServer) restart() {
	s.t.Helper()
	s.start()
}

// url is the server's client URL (the same across restarts).
func (s *natsServer) url() string {
	return "nats://" + net.JoinHostPort(s.opts.Host, strconv.Itoa(s.opts.Port))
}

// connect connects to s, reconnecting forever after a lost connection, and returns a
// JetStream context; the connection is closed when the test ends.
func connect(t *testing.T, s *natsServer) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(s.url(),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(20*time.Millisecond),
		nats.ReconnectJitter(10*time.Millisecond, 10*time.Millisecond),
	)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return nc, js
}

// createStream creates the test stream on cfg (Name and Subjects default to streamName
// and "outbox.>", storage to file).
func createStream(t *testing.T, js jetstream.JetStream, cfg jetstream.StreamConfig) jetstream.Stream {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = streamName
	}
	if cfg.Subjects == nil {
		cfg.Subjects = []string{outboxnats.DefaultSubjectPrefix + ".>"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	stream, err := js.CreateStream(ctx, cfg)
	if err != nil {
		t.Fatalf("create stream: %v", err)
	}
	return stream
}

// streamMessages returns every message of the stream, in stream order.
func streamMessages(t *testing.T, js jetstream.JetStream, name string) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	stream, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	var msgs []*jetstream.RawStreamMsg
	if info.State.Msgs == 0 {
		return nil
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatalf("get message %d: %v", seq, err)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// countByEventID counts the messages per outbox-event-id header.
func countByEventID(msgs []*jetstream.RawStreamMsg) map[string]int {
	n := make(map[string]int, len(msgs))
	for _, m := range msgs {
		n[m.Header.Get(outboxnats.HeaderEventID)]++
	}
	return n
}

// newRelay returns a Relay on js with cfg, failing the test on error.
func newRelay(t *testing.T, js jetstream.JetStream, cfg outboxnats.Config) *outboxnats.Relay {
	t.Helper()
	r, err := outboxnats.New(js, cfg)
	if err != nil {
		t.Fatalf("outboxnats.New: %v", err)
	}
	return r
}

// newDB returns a migrated SQLite outbox database of the test's own.
func newDB(t *testing.T) *sql.DB {
	t.Helper()
	db := newSQLiteDB(t)
	db.SetMaxOpenConns(1) // as the outbox advises for SQLite
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := outbox.Migrate(ctx, db, outbox.SQLite); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return db
}

// startOutbox starts an outbox on db with cfg (Dialect SQLite, a quick poller and a
// silent logger unless cfg sets them) and the subscriptions, stopped when the test
// ends.
func startOutbox(t *testing.T, db *sql.DB, cfg outbox.Config, subs ...outbox.Subscription) *outbox.Outbox {
	t.Helper()
	cfg.Dialect = outbox.SQLite
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 100 * time.Millisecond
		cfg.PollMaxInterval = -1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ob, err := outbox.New(db, cfg)
	if err != nil {
		t.Fatalf("outbox.New: %v", err)
	}
	for _, s := range subs {
		if err := ob.Subscribe(s); err != nil {
			t.Fatalf("subscribe %s/%s: %v", s.AggregateType, s.EventType, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := ob.Start(ctx); err != nil {
		t.Fatalf("start outbox: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := ob.Stop(ctx); err != nil {
			t.Errorf("stop outbox: %v", err)
		}
	})
	return ob
}

// write commits envs in one transaction and returns their IDs.
func write(t *testing.T, db *sql.DB, ob *outbox.Outbox, envs ...outbox.Envelope) []string {
	t.Helper()
	ids, err := writeErr(db, ob, envs...)
	if err != nil {
		t.Fatalf("write: %v", err)
	}
	return ids
}

func writeErr(db *sql.DB, ob *outbox.Outbox, envs ...outbox.Envelope) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var ids []string
	err := outbox.RunInTx(ctx, db, func(ctx context.Context, tx *outbox.Tx) error {
		var err error
		ids, err = ob.Writer().WriteAll(ctx, tx, envs)
		return err
	})
	return ids, err
}

// event returns the stored event id.
func event(t *testing.T, ob *outbox.Outbox, id string) outbox.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	e, err := ob.Events().Get(ctx, id)
	if err != nil {
		t.Fatalf("get event %s: %v", id, err)
	}
	return e
}

// waitFor polls cond until it returns true, failing the test after waitTimeout with
// what, and the last state described by cond's string.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last state: %s", waitTimeout, what, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitStatus waits until every event of ids has status want.
func waitStatus(t *testing.T, ob *outbox.Outbox, want outbox.Status, ids ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	pending := append([]string(nil), ids...)
	waitFor(t, "events "+want.String(), func() (bool, string) {
		for len(pending) > 0 {
			e, err := ob.Events().Get(ctx, pending[0])
			if err != nil {
				return false, err.Error()
			}
			if e.Status == outbox.StatusDead && want != outbox.StatusDead {
				t.Fatalf("event %s is DEAD, waiting for %s; last error: %s", e.ID, want, e.LastError)
			}
			if e.Status != want {
				return false, "event " + e.ID + " is " + e.Status.String() + ", last error: " + e.LastError
			}
			pending = pending[1:]
		}
		return true, ""
	})
}

// newSQLiteDB opens a new SQLite database file in the test's temp dir and closes it
// when the test ends.
func newSQLiteDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", outbox.SQLiteDSN(filepath.Join(t.TempDir(), "outbox.db")))
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close sqlite: %v", err)
		}
	})
	if err := db.PingContext(context.Background()); err != nil {
		t.Fatalf("ping sqlite: %v", err)
	}
	return db
}
