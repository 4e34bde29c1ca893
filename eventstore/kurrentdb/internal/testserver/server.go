package testserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// Options configure a Server. The zero value is a good default.
type Options struct {
	// StatsEvery writes a $stats event into $all after every StatsEvery
	// appends, and one at start, as a real node's statistics do. Zero means
	// 20; a negative value writes none.
	StatsEvery int
	// Now is the clock for the events' created time. Nil means time.Now.
	Now func() time.Time
	// MaxAppendSize is the largest append in bytes of data, metadata and
	// type, as the server's --max-append-size. Zero means 1 MiB.
	MaxAppendSize int
}

// Server is a running test server. Its log outlives restarts and lost
// connections; Close ends it.
type Server struct {
	store   *store
	faults  faults
	maxSize int

	addr string // 127.0.0.1:port, fixed for the server's life

	mu     sync.Mutex
	grpc   *grpc.Server
	lis    *connListener
	closed bool
	// drop is closed to end every open subscription (DropSubscriptions).
	drop chan struct{}
}

// Start starts a server on 127.0.0.1 with a free port.
func Start(opts Options) (*Server, error) {
	if opts.StatsEvery == 0 {
		opts.StatsEvery = 20
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxAppendSize <= 0 {
		opts.MaxAppendSize = 1 << 20
	}
	s := &Server{
		store:   newStore(opts.Now, opts.StatsEvery),
		maxSize: opts.MaxAppendSize,
		drop:    make(chan struct{}),
	}
	s.faults.init()
	if err := s.listen("127.0.0.1:0"); err != nil {
		return nil, err
	}
	return s, nil
}

// New starts a server for a test and closes it when the test ends.
func New(tb testing.TB) *Server {
	tb.Helper()
	s, err := Start(Options{})
	if err != nil {
		tb.Fatalf("testserver: %v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

// URL is the connection string for esdb.ParseConnectionString.
func (s *Server) URL() string {
	return "esdb://" + s.addr + "?tls=false"
}

// Close stops the server and ends every call; it is safe to call twice.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	s.grpc.Stop()
}

// Restart stops the server, which ends every call and connection as a
// crashed node would, and starts it again on the same port with the same
// log. The node's cache of event IDs starts empty, as on a real node (see
// ForgetEventIDs). As with a real crash, a client that was not in a call notices only
// when it next uses its connection: that call may fail, with
// ErrorUnavailable or with ErrorCodeUnknown wrapping io.EOF ("could not send
// append request header"), and the call after it reconnects. A client whose
// subscription has already reported the drop reconnects on its next call.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("testserver: restart after Close")
	}
	s.grpc.Stop()
	s.store.forgetIDs()
	return s.listenLocked(s.addr)
}

func (s *Server) listen(addr string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listenLocked(addr)
}

// listenLocked serves on addr. Binding the port just freed can fail for a
// moment while the kernel tidies up, so it tries for a short while.
func (s *Server) listenLocked(addr string) error {
	var l net.Listener
	var err error
	for range 50 {
		if l, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("testserver: listen on %s: %w", addr, err)
	}
	srv := grpc.NewServer(
		// The client pings every 10 s even when idle. grpc-go's default
		// policy answers that with GOAWAY ("too many pings"); KurrentDB
		// accepts it.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime: time.Second, PermitWithoutStream: true,
		}),
		grpc.MaxRecvMsgSize(17<<20), // what the client allows itself to receive
	)
	streams.RegisterStreamsServer(srv, &streamsService{srv: s})
	lis := newConnListener(l)
	s.grpc, s.lis = srv, lis
	if s.addr == "" { // set once, so that URL needs no lock
		s.addr = l.Addr().String()
	}
	go func() { _ = srv.Serve(lis) }() // returns when Stop closes the listener
	return nil
}

// dropChan is the channel that DropSubscriptions closes next.
func (s *Server) dropChan() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.drop
}

// cut closes the TCP connection of the call ctx belongs to.
func (s *Server) cut(ctx context.Context) {
	s.mu.Lock()
	lis := s.lis
	s.mu.Unlock()
	lis.cut(ctx)
}
