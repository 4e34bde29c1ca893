package testserver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Call is a kind of call that a fault applies to.
type Call int

const (
	// Append is AppendToStream and SetStreamMetadata.
	Append Call = iota + 1
	// Read is a read with a count: ReadStream, ReadAll, GetStreamMetadata.
	Read
	// Subscribe is SubscribeToStream and SubscribeToAll.
	Subscribe
	// Delete is DeleteStream (a soft delete).
	Delete
	// Tombstone is TombstoneStream (a hard delete).
	Tombstone
)

// String names the kind in fault messages: "append", "read", ...
func (c Call) String() string {
	switch c {
	case Append:
		return "append"
	case Read:
		return "read"
	case Subscribe:
		return "subscribe"
	case Delete:
		return "delete"
	case Tombstone:
		return "tombstone"
	}
	return fmt.Sprintf("Call(%d)", int(c))
}

// Disconnect says when a lost connection cuts an append.
type Disconnect int

const (
	// BeforeCommit loses the connection before the append is written: the
	// client gets an error and nothing was stored.
	BeforeCommit Disconnect = iota + 1
	// AfterCommit writes the append and then loses the connection before the
	// reply: the client gets an error although the events are stored, the
	// case an idempotent retry exists for.
	AfterCommit
)

type faults struct {
	mu         sync.Mutex
	fail       map[Call]failPlan
	delay      map[Call]delayPlan
	disconnect []Disconnect
}

type failPlan struct {
	n    int
	code codes.Code
}

type delayPlan struct {
	n int
	d time.Duration
}

func (f *faults) init() {
	f.fail = make(map[Call]failPlan)
	f.delay = make(map[Call]delayPlan)
}

// FailNext makes the next n calls of kind c fail with code before they have
// any effect. The client reports a failed count read on its first Recv, a
// failed subscription from SubscribeToAll or SubscribeToStream. With
// Unavailable the client also reconnects, as it does from a real node.
func (s *Server) FailNext(c Call, n int, code codes.Code) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	s.faults.fail[c] = failPlan{n: n, code: code}
}

// DelayNext holds the next n calls of kind c for d before serving them, so
// that a client deadline shorter than d fires. A call whose client gave up
// meanwhile is abandoned without effect, as a real node drops a request
// whose deadline has passed.
func (s *Server) DelayNext(c Call, n int, d time.Duration) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	s.faults.delay[c] = delayPlan{n: n, d: d}
}

// DisconnectNextAppend makes the next append lose its connection, before or
// after its commit. The TCP connection the append came in on dies, and with
// it every other call of that client (one esdb.Client uses one connection);
// the server keeps its log and accepts the client's reconnection on the same
// address.
func (s *Server) DisconnectNextAppend(when Disconnect) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	s.faults.disconnect = append(s.faults.disconnect, when)
}

// ForgetEventIDs empties the cache of event IDs that makes an Any or
// StreamExists append of already stored events idempotent, as a busy node's
// eviction or a restart does on a real server. Such a repeat is then written
// again. Exact and NoStream repeats are still recognised: the server checks
// them against the stored events.
func (s *Server) ForgetEventIDs() {
	s.store.forgetIDs()
}

// DropSubscriptions ends every open subscription now with
// codes.Unavailable; the client reports it as SubscriptionDropped.
// Subscriptions started later are not affected.
func (s *Server) DropSubscriptions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.drop)
	s.drop = make(chan struct{})
}

// enter applies the delay and failure planned for a call of kind c.
func (s *Server) enter(ctx context.Context, c Call) error {
	s.faults.mu.Lock()
	var wait time.Duration
	if p := s.faults.delay[c]; p.n > 0 {
		wait = p.d
		p.n--
		s.faults.delay[c] = p
	}
	fail := s.faults.fail[c]
	failed := fail.n > 0
	if failed {
		fail.n--
		s.faults.fail[c] = fail
	}
	s.faults.mu.Unlock()

	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	if failed {
		return status.Errorf(fail.code, "testserver: injected %s failure", c)
	}
	return nil
}

// takeDisconnect returns the disconnect planned for this append, if any.
func (s *Server) takeDisconnect() Disconnect {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	if len(s.faults.disconnect) == 0 {
		return 0
	}
	d := s.faults.disconnect[0]
	s.faults.disconnect = s.faults.disconnect[1:]
	return d
}
