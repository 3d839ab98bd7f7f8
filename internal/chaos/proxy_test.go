package chaos

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// echoServer echoes lines until the listener closes.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(c, c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func roundTrip(c net.Conn, r *bufio.Reader, msg string, wait time.Duration) (string, error) {
	_ = c.SetDeadline(time.Now().Add(wait))
	if _, err := io.WriteString(c, msg+"\n"); err != nil {
		return "", err
	}
	return r.ReadString('\n')
}

func TestProxy(t *testing.T) {
	p, err := NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	c1, r1 := dial()
	if got, err := roundTrip(c1, r1, "hello", 5*time.Second); err != nil || got != "hello\n" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}

	// Blackhole: silence, no error, on the open connection and on a new one.
	p.Blackhole()
	var ne net.Error
	if _, err := roundTrip(c1, r1, "lost", 300*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("blackholed connection: %v, want a timeout", err)
	}
	c2, r2 := dial()
	if _, err := roundTrip(c2, r2, "lost", 300*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("new connection during the blackhole: %v, want a timeout", err)
	}
	// Heal: new connections work, the blackholed ones stay dead.
	p.Heal()
	if _, err := roundTrip(c1, r1, "still lost", 300*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("blackholed connection after Heal: %v, want a timeout", err)
	}
	c3, r3 := dial()
	if got, err := roundTrip(c3, r3, "again", 5*time.Second); err != nil || got != "again\n" {
		t.Fatalf("after Heal: %q, %v", got, err)
	}

	// Reset: the peer sees the connection aborted.
	if n := p.Reset(); n < 1 {
		t.Fatalf("Reset aborted %d connections", n)
	}
	if _, err := roundTrip(c3, r3, "gone", 5*time.Second); err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("after Reset: %v, want a connection error", err)
	}
}

func TestHostPort(t *testing.T) {
	pg := "postgres://postgres@127.0.0.1:5432/outbox_test?sslmode=disable"
	my := "root:outbox@tcp(127.0.0.1:3306)/outbox_test?parseTime=true&loc=UTC"
	if got := HostPort(pg); got != "127.0.0.1:5432" {
		t.Errorf("HostPort(pg) = %q", got)
	}
	if got := HostPort(my); got != "127.0.0.1:3306" {
		t.Errorf("HostPort(mysql) = %q", got)
	}
	if got := WithHostPort(pg, "127.0.0.1:9"); got != "postgres://postgres@127.0.0.1:9/outbox_test?sslmode=disable" {
		t.Errorf("WithHostPort(pg) = %q", got)
	}
	if got := WithHostPort(my, "127.0.0.1:9"); got != "root:outbox@tcp(127.0.0.1:9)/outbox_test?parseTime=true&loc=UTC" {
		t.Errorf("WithHostPort(mysql) = %q", got)
	}
}
