package kurrentdb_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/kurrentdb"
	"github.com/cairn-es/cairn/eventstore/kurrentdb/internal/testserver"
)

func ev(typ, data string) eventstore.EventData {
	return eventstore.EventData{Type: typ, SchemaVersion: 1, Data: []byte(data)}
}

// withID is e with a caller-chosen ID, as the command bus sends.
func withID(e eventstore.EventData) eventstore.EventData {
	e.ID = uuid.New()
	return e
}

// readStream returns the events of stream.
func readStream(t *testing.T, s eventstore.Store, stream string) []eventstore.Event {
	var out []eventstore.Event
	for e, err := range s.ReadStream(context.Background(), stream, eventstore.Forward(0)) {
		require.NoError(t, err)
		out = append(out, e)
	}
	return out
}

// rawClient is a client of srv that writes what Cairn would not.
func rawClient(t *testing.T, srv *testserver.Server) *esdb.Client {
	cfg, err := esdb.ParseConnectionString(srv.URL())
	require.NoError(t, err)
	cfg.Logger = esdb.NoopLogging()
	cli, err := esdb.NewClient(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func TestConnectionStrings(t *testing.T) {
	for _, url := range []string{"esdb://localhost:2113?tls=false", "kurrentdb://localhost:2113", "KurrentDB://admin:changeit@a:2113,b:2113",
		"esdb+discover://cluster.example:2113", "kurrentdb+discover://cluster.example:2113?nodePreference=follower"} {
		_, err := kurrentdb.ParseConnString(url)
		assert.NoError(t, err, url)
	}
	for _, url := range []string{"", "postgres://localhost/db", "kurrentdb//localhost", "esdb://localhost:2113?tls=maybe"} {
		_, err := kurrentdb.ParseConnString(url)
		assert.Error(t, err, url)
		if err != nil {
			assert.Contains(t, err.Error(), "kurrentdb: connection string", url)
		}
		_, err = kurrentdb.Open(context.Background(), url, kurrentdb.Options{})
		assert.Error(t, err, url)
	}
}

// Stream names pass through as they are: KurrentDB's names are bytes.
func TestStreamNamesAreKeptAsTheyAre(t *testing.T) {
	srv := testserver.New(t)
	s := open(t, srv.URL())
	ctx := context.Background()
	names := []string{"order-" + uuid.NewString(), "kunde-Zürich-ß", "顧客-42", "a-b-c-d"}
	for _, name := range names {
		_, err := s.Append(ctx, name, eventstore.NoStream, ev("named", `{}`))
		require.NoError(t, err, name)
		got := readStream(t, s, name)
		require.Len(t, got, 1, name)
		assert.Equal(t, name, got[0].StreamID)
	}
	var seen []string
	for e, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{Types: []string{"named"}}) {
		require.NoError(t, err)
		seen = append(seen, e.StreamID)
	}
	assert.Equal(t, names, seen)
}

// The store refuses what KurrentDB or the store keeps for itself, naming
// it, and writes nothing.
func TestReservedNamesAreRefused(t *testing.T) {
	s := open(t, testserver.New(t).URL())
	ctx := context.Background()
	_, err := s.Append(ctx, kurrentdb.StatePrefix+"checkpoint-x", eventstore.Any, ev("x", `{}`))
	require.ErrorIs(t, err, eventstore.ErrInvalidArgument)
	assert.Contains(t, err.Error(), kurrentdb.StatePrefix)
	_, err = s.Append(ctx, "order-1", eventstore.Any, ev("x", `{}`), ev("$metadata", `{}`))
	var bad *eventstore.InvalidArgumentError
	require.ErrorAs(t, err, &bad)
	assert.Equal(t, 1, bad.Index)
	assert.Empty(t, readStream(t, s, "order-1"))
}

// A refused append reports the stream's actual version, whether the
// client's error text carries it or the store reads it (the client says
// "0" when the server sends none, which is ambiguous with version 0).
func TestWrongVersionNamesTheActualVersion(t *testing.T) {
	s := open(t, testserver.New(t).URL())
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		events int
		want   eventstore.ExpectedVersion
	}{{"absent", 0, eventstore.NoStream}, {"at-zero", 1, eventstore.Exact(0)}, {"at-five", 6, eventstore.Exact(5)}} {
		stream := "wrong-" + c.name
		for range c.events {
			_, err := s.Append(ctx, stream, eventstore.Any, ev("x", `{}`))
			require.NoError(t, err)
		}
		for _, chosen := range []bool{false, true} {
			e := ev("x", `{}`)
			if chosen {
				e = withID(e)
			}
			_, err := s.Append(ctx, stream, eventstore.Exact(9), e)
			var wrong *eventstore.WrongVersionError
			require.ErrorAs(t, err, &wrong, "%s, chosen IDs %v", c.name, chosen)
			assert.Equal(t, c.want, wrong.Actual, "%s, chosen IDs %v", c.name, chosen)
			assert.Equal(t, stream, wrong.Stream)
		}
	}
}

// A connection lost in the middle of an append leaves its outcome
// unknown; sending it again with its IDs stores it exactly once, whether
// the first attempt was written or not.
func TestAppendRetriedAfterALostConnectionIsStoredOnce(t *testing.T) {
	srv := testserver.New(t)
	s := open(t, srv.URL())
	ctx := context.Background()
	for _, when := range []testserver.Disconnect{testserver.BeforeCommit, testserver.AfterCommit} {
		stream := fmt.Sprintf("lost-%d", when)
		events := []eventstore.EventData{withID(ev("a", `1`)), withID(ev("b", `2`))}
		srv.DisconnectNextAppend(when)
		_, err := s.Append(ctx, stream, eventstore.NoStream, events...)
		require.ErrorIs(t, err, eventstore.ErrUnavailable, "a lost connection is worth a retry")
		var res eventstore.AppendResult
		require.Eventually(t, func() bool {
			res, err = s.Append(ctx, stream, eventstore.NoStream, events...)
			return err == nil
		}, 10*time.Second, 20*time.Millisecond, "the client reconnects")
		assert.Equal(t, when == testserver.AfterCommit, res.Duplicate, "the retry of a written append is a duplicate")
		got := readStream(t, s, stream)
		require.Len(t, got, 2)
		assert.Equal(t, events[0].ID, got[0].ID)
		assert.Equal(t, got[1].Position, res.Position)
	}
}

// A call the server holds past the store's call timeout fails as
// unavailable; the store is not stuck.
func TestCallsHaveDeadlines(t *testing.T) {
	srv := testserver.New(t)
	s, err := kurrentdb.Open(context.Background(), srv.URL(), kurrentdb.Options{CallTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	srv.DelayNext(testserver.Append, 1, 5*time.Second)
	_, err = s.Append(ctx, "slow", eventstore.Any, ev("x", `{}`))
	require.ErrorIs(t, err, eventstore.ErrUnavailable)
	srv.DelayNext(testserver.Read, 1, 5*time.Second)
	for _, err := range s.ReadStream(ctx, "slow", eventstore.Forward(0)) {
		require.ErrorIs(t, err, eventstore.ErrUnavailable)
		break
	}
	_, err = s.Append(ctx, "slow", eventstore.Any, ev("x", `{}`))
	require.NoError(t, err)
}

// Every read error reaches the reader: transient ones as
// eventstore.ErrUnavailable, the others as they are.
func TestReadErrorsAreSurfaced(t *testing.T) {
	srv := testserver.New(t)
	s := open(t, srv.URL())
	ctx := context.Background()
	_, err := s.Append(ctx, "read-errors", eventstore.Any, ev("x", `{}`))
	require.NoError(t, err)
	for _, c := range []struct {
		code      codes.Code
		transient bool
	}{{codes.Unavailable, true}, {codes.PermissionDenied, false}, {codes.Internal, false}} {
		srv.FailNext(testserver.Read, 1, c.code)
		n := 0
		for _, err := range s.ReadStream(ctx, "read-errors", eventstore.Forward(0)) {
			require.Error(t, err, c.code)
			assert.Equal(t, c.transient, errors.Is(err, eventstore.ErrUnavailable), c.code)
			n++
		}
		assert.Equal(t, 1, n, "one error, no event, for %s", c.code)
		srv.FailNext(testserver.Read, 1, c.code)
		n = 0
		for _, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
			require.Error(t, err, c.code)
			n++
		}
		assert.Equal(t, 1, n, "ReadAll: one error, for %s", c.code)
	}
}

// A subscriber keeps every event, once, in order, while the server drops
// its subscriptions again and again: a filtered subscriber's own, on the
// server's filter by stream or by type, and the store's live subscription
// that wakes an unfiltered one.
func TestDroppedSubscriptionsLoseAndDoubleNothing(t *testing.T) {
	for name, filter := range map[string]eventstore.Filter{
		"unfiltered":  {},
		"by stream":   {StreamPrefixes: []string{"sub-"}},
		"by type":     {Types: []string{"x"}},
		"both":        {Types: []string{"x"}, StreamPrefixes: []string{"sub-"}},
		"by stream 2": {StreamPrefixes: []string{"sub-", "other-"}},
	} {
		t.Run(name, func(t *testing.T) {
			srv := testserver.New(t)
			s := open(t, srv.URL())
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			const total = 300
			got := make(chan eventstore.Event, total)
			go func() {
				for e, err := range s.Subscribe(ctx, eventstore.Start, filter) {
					if err != nil {
						return
					}
					got <- e
				}
			}()
			for i := range total / 3 {
				_, err := s.Append(ctx, fmt.Sprintf("sub-%d", i%7), eventstore.Any, ev("x", fmt.Sprint(3*i)), ev("x", fmt.Sprint(3*i+1)), ev("x", fmt.Sprint(3*i+2)))
				require.NoError(t, err)
				if i%4 == 0 {
					_, err := s.Append(ctx, "unrelated", eventstore.Any, ev("y", `0`))
					require.NoError(t, err)
				}
				if i%10 == 0 {
					srv.DropSubscriptions()
				}
			}
			for i := 0; i < total; {
				select {
				case e := <-got:
					if filter.IsZero() && e.Type == "y" {
						continue // the unrelated events match no filter but the empty one
					}
					require.Equal(t, fmt.Sprint(i), string(e.Data), "event %d in order, once", i)
					i++
				case <-time.After(30 * time.Second):
					t.Fatalf("event %d never came", i)
				}
			}
			select {
			case e := <-got:
				if !filter.IsZero() || e.Type != "y" {
					t.Fatalf("an event came twice: %s", e.Data)
				}
			case <-time.After(200 * time.Millisecond):
			}
		})
	}
}

// Events another writer stored without Cairn's metadata read as events
// without metadata; metadata that is not Cairn's JSON is corrupt, naming
// where. A stream tombstoned outside Cairn is corrupt too: Cairn never
// deletes one.
func TestForeignEvents(t *testing.T) {
	srv := testserver.New(t)
	cli := rawClient(t, srv)
	s := open(t, srv.URL())
	ctx := context.Background()
	_, err := cli.AppendToStream(ctx, "foreign-plain", esdb.AppendToStreamOptions{},
		esdb.EventData{EventType: "imported", ContentType: esdb.ContentTypeJson, Data: []byte(`{"a":1}`)})
	require.NoError(t, err)
	got := readStream(t, s, "foreign-plain")
	require.Len(t, got, 1)
	assert.Equal(t, eventstore.Metadata{}, got[0].Metadata)
	assert.Equal(t, uint32(0), got[0].SchemaVersion)

	_, err = cli.AppendToStream(ctx, "foreign-bad", esdb.AppendToStreamOptions{},
		esdb.EventData{EventType: "imported", ContentType: esdb.ContentTypeBinary, Data: []byte{1}, Metadata: []byte("not json")})
	require.NoError(t, err)
	for _, err := range s.ReadStream(ctx, "foreign-bad", eventstore.Forward(0)) {
		require.ErrorIs(t, err, eventstore.ErrCorrupt)
		assert.Contains(t, err.Error(), `"foreign-bad"`)
	}

	_, err = s.Append(ctx, "tombstoned", eventstore.NoStream, ev("x", `{}`))
	require.NoError(t, err)
	_, err = cli.TombstoneStream(ctx, "tombstoned", esdb.TombstoneStreamOptions{})
	require.NoError(t, err)
	for _, err := range s.ReadStream(ctx, "tombstoned", eventstore.Forward(0)) {
		require.ErrorIs(t, err, eventstore.ErrCorrupt)
	}
	_, err = s.Append(ctx, "tombstoned", eventstore.Any, ev("x", `{}`))
	require.Error(t, err)
}

// liveWithin is how long the outage tests give a call, or Close, to return:
// far beyond the deadlines they set, so that only a hang fails them.
const liveWithin = 15 * time.Second

// returnsWithin fails t unless fn returns within liveWithin.
func returnsWithin(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(liveWithin):
		t.Fatalf("%s has not returned after %s", what, liveWithin)
	}
}

// While no node can be reached, the client looks for one without looking
// at any context, and holds every call meanwhile; calls still end soon
// after their deadlines, as ErrUnavailable, and Close returns. Found by
// review: they hung for good, Close too.
func TestCallsAndCloseReturnWhileTheServerIsDown(t *testing.T) {
	link := outage(t)
	link.down() // the node is down when the service starts

	s, err := kurrentdb.Open(context.Background(), "esdb://"+link.addr+"?tls=false", kurrentdb.Options{CallTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	returnsWithin(t, "appends during the outage", func() {
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				defer cancel()
				_, err := s.Append(ctx, fmt.Sprintf("down-%d", i), eventstore.Any, ev("x", `{}`))
				assert.Error(t, err)
				assert.True(t, errors.Is(err, eventstore.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded), "%v", err)
			})
		}
		wg.Wait()
	})
	returnsWithin(t, "Close", func() { require.NoError(t, s.Close()) })
}

// The same for a store that was working when its node went away, with a
// call in flight at Close.
func TestCloseReturnsAfterAnOutageMidLife(t *testing.T) {
	link := outage(t)
	s, err := kurrentdb.Open(context.Background(), "esdb://"+link.addr+"?tls=false", kurrentdb.Options{CallTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	_, err = s.Append(context.Background(), "gone", eventstore.Any, ev("x", `{}`))
	require.NoError(t, err)
	link.down()
	returnsWithin(t, "appends after the node went away", func() {
		for range 3 {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			_, err = s.Append(ctx, "gone", eventstore.Any, ev("x", `{}`))
			cancel()
			require.Error(t, err)
		}
	})
	inFlight := make(chan struct{})
	go func() {
		defer close(inFlight)
		_, _ = s.Append(context.Background(), "gone", eventstore.Any, ev("x", `{}`))
	}()
	returnsWithin(t, "Close", func() { require.NoError(t, s.Close()) })
	returnsWithin(t, "the append in flight at Close", func() { <-inFlight })
}

// Once a node is back, a store that went through an outage works again:
// the client reaches it and lets the calls it held go.
func TestStoreRecoversAfterAnOutage(t *testing.T) {
	link := outage(t)
	s, err := kurrentdb.Open(context.Background(), "esdb://"+link.addr+"?tls=false", kurrentdb.Options{CallTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	_, err = s.Append(context.Background(), "back", eventstore.Any, ev("x", `{}`))
	require.NoError(t, err)
	link.down()
	returnsWithin(t, "appends during the outage", func() {
		for range 3 {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			_, err = s.Append(ctx, "back", eventstore.Any, ev("x", `{}`))
			cancel()
			require.Error(t, err)
		}
	})
	link.up()
	require.Eventually(t, func() bool {
		_, err := s.Append(context.Background(), "back", eventstore.Any, ev("x", `{}`))
		return err == nil
	}, liveWithin, 50*time.Millisecond, "appends work again once the node is back")
	got := readStream(t, s, "back")
	assert.GreaterOrEqual(t, len(got), 2)
}

// outage returns a proxy to a new test server, through which a store can
// lose its node and get it back. When t ends, the node comes back and the
// test waits for every client to end: a client that the store left open
// because it held calls (see docs/kurrentdb.md) ends once a node answers,
// and would otherwise look for one for the rest of the test binary.
func outage(t *testing.T) *proxy {
	srv := testserver.New(t)
	link := newProxy(t, strings.TrimSuffix(strings.TrimPrefix(srv.URL(), "esdb://"), "?tls=false"))
	t.Cleanup(func() {
		link.up()
		require.Eventually(t, func() bool {
			buf := make([]byte, 1<<20)
			return !strings.Contains(string(buf[:runtime.Stack(buf, true)]), "esdb.connectionStateMachine")
		}, liveWithin, 50*time.Millisecond, "the clients left open end once their node is back")
	})
	return link
}

// proxy forwards TCP connections to a server, and can go down (refusing
// and cutting connections) and up again on the same address: a node that
// becomes unreachable for a while.
type proxy struct {
	t      *testing.T
	addr   string
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
}

func newProxy(t *testing.T, target string) *proxy {
	p := &proxy{t: t, target: target}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.down)
	return p
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", p.target)
			if err != nil {
				_ = in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
			go func() { _, _ = io.Copy(in, out); _ = in.Close() }()
		}
	}()
}

// down closes the listener and every connection through it.
func (p *proxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// up listens again on the same address, unless it is up.
func (p *proxy) up() {
	p.mu.Lock()
	listening := p.ln != nil
	p.mu.Unlock()
	if listening {
		return
	}
	ln, err := net.Listen("tcp", p.addr)
	require.NoError(p.t, err)
	p.serve(ln)
}
