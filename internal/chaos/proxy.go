package chaos

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
)

// Proxy is a TCP proxy between nodes and a database server that can cut the network:
// [Proxy.Blackhole] makes every open connection, and every new one until
// [Proxy.Heal], silently drop what it carries in both directions (the peers see no
// error, only silence, as behind a dead router), and [Proxy.Reset] aborts every open
// connection with a TCP reset. A blackholed connection stays dead after Heal: only a
// deadline frees a caller waiting on it, which is what the blackhole scenarios prove.
type Proxy struct {
	ln     net.Listener
	target string

	mu        sync.Mutex
	blackhole bool
	trigger   []byte // BlackholeOn's pattern
	conns     map[*proxyConn]struct{}
	closed    bool
	wg        sync.WaitGroup
}

type proxyConn struct {
	client, server net.Conn
	mu             sync.Mutex
	dead           bool // blackholed
}

func (c *proxyConn) isDead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

func (c *proxyConn) kill() {
	c.mu.Lock()
	c.dead = true
	c.mu.Unlock()
}

// NewProxy listens on 127.0.0.1 on a free port and forwards to target ("host:port").
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[*proxyConn]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the proxy's "host:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Blackhole kills every open connection and every new one until Heal.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blackhole = true
	for c := range p.conns {
		c.kill()
	}
}

// BlackholeOn blackholes, from now on, each connection whose client sends bytes holding
// pattern, before they reach the server (within one read of the connection: a pattern
// split across two reads is missed). It makes a fault hit one exact statement, such as
// a COMMIT. A nil pattern turns it off.
func (p *Proxy) BlackholeOn(pattern []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.trigger = bytes.Clone(pattern)
}

// triggered reports whether b holds the BlackholeOn pattern.
func (p *Proxy) triggered(b []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.trigger != nil && bytes.Contains(b, p.trigger)
}

// Heal forwards new connections again. Blackholed connections stay dead.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blackhole = false
}

// Reset aborts every open connection with a TCP reset (RST) on both sides and returns
// how many it aborted.
func (p *Proxy) Reset() int {
	p.mu.Lock()
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		abort(c.client)
		abort(c.server)
	}
	return len(conns)
}

// Conns is the number of open connections.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Close stops listening, closes every connection and waits for the proxy's
// goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.Reset()
	p.wg.Wait()
	return err
}

func abort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // close sends RST
	}
	_ = c.Close()
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			abort(client)
			continue
		}
		c := &proxyConn{client: client, server: server}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			abort(client)
			abort(server)
			continue
		}
		c.dead = p.blackhole
		p.conns[c] = struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		done := make(chan struct{}, 2)
		go p.pipe(c, client, server, true, done)
		go p.pipe(c, server, client, false, done)
	}
}

// pipe copies from src to dst until either side fails, dropping the bytes while c is
// blackholed. upstream is the client-to-server direction. The second pipe of a
// connection to finish removes it.
func (p *Proxy) pipe(c *proxyConn, src, dst net.Conn, upstream bool, done chan struct{}) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && upstream && p.triggered(buf[:n]) {
			c.kill()
		}
		if n > 0 && !c.isDead() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				abort(dst)
			} else {
				_ = dst.Close()
			}
			_ = src.Close()
			break
		}
	}
	done <- struct{}{}
	if len(done) == 2 {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}
}
