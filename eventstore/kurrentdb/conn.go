package kurrentdb

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/cairn-es/cairn/eventstore"
)

// stuckAfter is how long a call may go on after its context is done before
// the store gives up waiting for it. gRPC ends a call at once when its
// context ends; one that goes on is held inside the client.
const stuckAfter = 2 * time.Second

// conn is one client and the calls using it.
//
// The client (v4.2.0) has two flaws that a store must live with. While no
// node answers, its connection goroutine looks for one without looking at
// any context, and every call waits for it on an unbuffered channel (and
// once it gives up, it stops reading that channel, so a call that was
// waiting waits for good: the store makes it never give up). And closing
// the client closes that channel under any call still waiting to send on
// it, which panics. So the store runs each call in a goroutine of its own
// that it can leave behind when the client holds it past the end of its
// context; while the client holds a call, new calls fail at once with
// ErrUnavailable instead of piling up behind it, until the client reaches
// a node and lets the held calls go; and the store closes a client only
// when no call is inside it.
type conn struct {
	cli   *esdb.Client
	users sync.WaitGroup
	// held counts the calls that the client holds past their contexts.
	held atomic.Int32
}

// errHeld is a call's answer while the client holds calls that outlived
// their contexts: it is looking for a node.
var errHeld = fmt.Errorf("%w: kurrentdb: the client is looking for a node", eventstore.ErrUnavailable)

// acquire returns the current client, counted as in use.
func (s *Store) acquire() (*conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, eventstore.ErrClosed
	}
	if s.conn.held.Load() > 0 {
		return nil, errHeld
	}
	s.conn.users.Add(1)
	return s.conn, nil
}

// recovered turns a panic of the client in the calling goroutine (it
// panics on replies it does not expect) into an error for report, and
// ends that goroutine's use of c. Every goroutine that calls the client
// defers it.
func recovered(c *conn, report func(error)) {
	if p := recover(); p != nil {
		report(fmt.Errorf("kurrentdb: the client failed: %v", p))
	}
	c.users.Done()
}

// call runs fn with the current client, under ctx bounded by the call
// timeout and by Close, and returns when fn does or, if the client holds
// fn past the end of ctx, soon after (see conn). fn must leave what it
// writes unread by its caller when it fails. A client that has shut down
// for good is replaced, so that the next call dials again.
func (s *Store) call(ctx context.Context, fn func(ctx context.Context, cli *esdb.Client) error) error {
	c, err := s.acquire()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	defer context.AfterFunc(s.closing, cancel)()
	done := make(chan error, 1)
	go func() {
		defer recovered(c, func(err error) { done <- err })
		done <- fn(ctx, c.cli)
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		t := time.NewTimer(stuckAfter)
		defer t.Stop()
		select {
		case err = <-done:
		case <-t.C:
			if c.held.Add(1) == 1 {
				s.log.Warn("kurrentdb: no node answers; calls fail until the client reaches one")
			}
			go func() {
				<-done
				if c.held.Add(-1) == 0 {
					s.log.Info("kurrentdb: the client reached a node again")
				}
			}()
			return fmt.Errorf("%w: %w", errHeld, ctx.Err())
		}
	}
	if isCode(err, esdb.ErrorCodeConnectionClosed) {
		s.replace(c)
	}
	return err
}

// replace swaps old for a new client, unless another call did already,
// and closes old once its calls are done.
func (s *Store) replace(old *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.conn != old {
		return
	}
	cli, err := esdb.NewClient(s.cfg)
	if err != nil {
		s.log.Error("kurrentdb: cannot make a new client", "error", err)
		return
	}
	s.conn = &conn{cli: cli}
	s.log.Info("kurrentdb: the client closed its connection for good; a new client dials again")
	go func() {
		old.users.Wait()
		_ = old.cli.Close()
	}()
}

// closeConn waits for the store's goroutines and c's calls, which Close
// has told to end, and closes c's client; if the client holds calls past
// stuckAfter, it is left open (closing it would panic them), and ends
// once a node answers.
func (s *Store) closeConn(c *conn) error {
	drained := make(chan struct{})
	go func() {
		s.live.Wait()
		c.users.Wait()
		close(drained)
	}()
	t := time.NewTimer(stuckAfter)
	defer t.Stop()
	select {
	case <-drained:
		return c.cli.Close()
	case <-t.C:
		s.log.Warn("kurrentdb: closed, leaving the client open: it holds calls while it looks for a node")
		go func() {
			<-drained
			_ = c.cli.Close()
		}()
		return nil
	}
}
