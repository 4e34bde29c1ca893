package testserver

import (
	"context"
	"net"
	"sync"

	"google.golang.org/grpc/peer"
)

// connListener remembers the connections it accepted, so that a fault can
// cut the one connection a call came in on (its TCP connection, like a
// network failure), while the listener goes on accepting new ones.
type connListener struct {
	net.Listener
	mu    sync.Mutex
	conns map[string]net.Conn // by remote address
}

func newConnListener(l net.Listener) *connListener {
	return &connListener{Listener: l, conns: make(map[string]net.Conn)}
}

func (l *connListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, owner: l, key: c.RemoteAddr().String()}
	l.mu.Lock()
	l.conns[tc.key] = tc
	l.mu.Unlock()
	return tc, nil
}

// cut closes the connection that ctx's call arrived on.
func (l *connListener) cut(ctx context.Context) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return
	}
	l.mu.Lock()
	c := l.conns[p.Addr.String()]
	l.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

type trackedConn struct {
	net.Conn
	owner *connListener
	key   string
	once  sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.owner.mu.Lock()
		if c.owner.conns[c.key] == c {
			delete(c.owner.conns, c.key)
		}
		c.owner.mu.Unlock()
	})
	return c.Conn.Close()
}
