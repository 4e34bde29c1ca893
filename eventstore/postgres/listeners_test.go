package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
)

// notifyCounter counts the NOTIFYs a pool sends, and the listener checks
// it has finished.
type notifyCounter struct{ notifies, checks atomic.Int64 }

type listenerCheckKey struct{}

func (c *notifyCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	switch {
	case strings.Contains(data.SQL, "pg_notify"):
		c.notifies.Add(1)
	case strings.Contains(data.SQL, "pg_stat_activity") && strings.Contains(data.SQL, "application_name"):
		return context.WithValue(ctx, listenerCheckKey{}, true)
	}
	return ctx
}

func (c *notifyCounter) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if ctx.Value(listenerCheckKey{}) != nil {
		c.checks.Add(1)
	}
}

func appendOne(t *testing.T, s *postgres.Store, stream string) {
	t.Helper()
	_, err := s.Append(context.Background(), stream, eventstore.Any, eventstore.EventData{Type: "t", Data: []byte(`{}`)})
	require.NoError(t, err)
}

// subscribeFirst subscribes to s from after and returns the stream of the
// first event each read brings, as it arrives.
func subscribeFirst(t *testing.T, s *postgres.Store, after eventstore.Position) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	got := make(chan string, 100)
	go func() {
		for ev, err := range s.Subscribe(ctx, after, eventstore.Filter{}) {
			if err != nil {
				return
			}
			got <- ev.StreamID
		}
	}()
	return got
}

func within(t *testing.T, got <-chan string, want string, d time.Duration, what string) {
	t.Helper()
	select {
	case stream := <-got:
		assert.Equal(t, want, stream, what)
	case <-time.After(d):
		t.Fatalf("%s: not seen within %s", what, d)
	}
}

// TestAppendsNotifyNobodyWhenNobodyListens: with no other store listening
// on the channel, appends send no NOTIFY (each was a round trip and a
// transaction of the server's); the store's own subscribers, woken
// directly, still see every append at once.
func TestAppendsNotifyNobodyWhenNobodyListens(t *testing.T) {
	schema := server.NewSchema("quiet")
	counter := &notifyCounter{}
	s := tracedStore(t, postgres.Options{Schema: schema, PollInterval: time.Hour}, counter)
	own := subscribeFirst(t, s, eventstore.Start) // its own listener is not another's
	time.Sleep(200 * time.Millisecond)
	for i := range 20 {
		appendOne(t, s, fmt.Sprint("order-", i))
		within(t, own, fmt.Sprint("order-", i), 2*time.Second, "the store's own subscriber")
		time.Sleep(10 * time.Millisecond) // past the 5 ms between two NOTIFYs
	}
	assert.Zero(t, counter.notifies.Load(), "NOTIFYs sent with nobody listening")
	assert.Positive(t, counter.checks.Load())
	assert.LessOrEqual(t, counter.checks.Load(), int64(2), "the check runs at most once a second")
}

// TestAnotherStoresListenerIsNotified: two stores of one schema, in two
// processes' stead. The writer appends first, finding no listener; the
// reader then subscribes (an hour's poll): the writer's appends reach it
// at once, both while the writer still trusts its earlier look (the
// reader's first second: its listener wakes it) and after (NOTIFY).
func TestAnotherStoresListenerIsNotified(t *testing.T) {
	schema := server.NewSchema("heard")
	opts := postgres.Options{Schema: schema, PollInterval: time.Hour}
	// Three seconds of trust (one in production), so that the test does
	// not depend on the machine's speed.
	const trust = 3 * time.Second
	counter := &notifyCounter{}
	writer := tracedStore(t, opts, counter)
	reader := newStore(t, opts)
	writer.SetListenerCheck(trust)
	reader.SetListenerCheck(trust)
	looked := time.Now()
	appendOne(t, writer, "before") // the writer looks, and finds nobody
	require.Eventually(t, func() bool { return counter.checks.Load() > 0 }, 2*time.Second, time.Millisecond)

	got := subscribeFirst(t, reader, eventstore.Start)
	within(t, got, "before", 2*time.Second, "the catch-up read")
	time.Sleep(300 * time.Millisecond) // the reader LISTENs, and its first wake-up is past
	appendOne(t, writer, "early")
	within(t, got, "early", time.Second, "an append the writer did not notify")
	require.Less(t, time.Since(looked), trust, "too slow to tell: the writer may have looked again")
	assert.Zero(t, counter.notifies.Load(), "the writer trusted its look")

	time.Sleep(time.Until(looked.Add(trust + time.Second))) // past the reader's warm-up and the writer's trust
	notifies := counter.notifies.Load()
	appendOne(t, writer, "late")
	within(t, got, "late", time.Second, "an append after the warm-up")
	assert.Greater(t, counter.notifies.Load(), notifies, "the writer notified the reader's listener")
}

// TestListenersOfAnotherLoginAreSeen: pg_stat_activity shows a session's
// application_name to every login, so a writer that is not a superuser
// sees the listener of another login, also behind a proxy that adds to
// the name; a listener whose name is the store's own is not another's.
func TestListenersOfAnotherLoginAreSeen(t *testing.T) {
	ctx := context.Background()
	admin := newPoolOnce(t)
	suffix := strings.ReplaceAll(server.NewSchema("r"), "-", "_")
	writerRole, listenerRole := "cairn_writer_"+suffix, "cairn_listener_"+suffix
	for _, role := range []string{writerRole, listenerRole} {
		_, err := admin.Exec(ctx, "CREATE ROLE "+role+" LOGIN")
		require.NoError(t, err)
		t.Cleanup(func() { _, _ = admin.Exec(ctx, "DROP ROLE IF EXISTS "+role) })
	}
	connect := func(role, appName string) *pgx.Conn {
		cfg, err := pgx.ParseConfig(server.URL)
		require.NoError(t, err)
		cfg.User = role
		if appName != "" {
			cfg.RuntimeParams["application_name"] = appName
		}
		conn, err := pgx.ConnectConfig(ctx, cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close(ctx) })
		return conn
	}
	prefix := postgres.ListenerPrefix("cairn_events_" + suffix)
	writer := connect(writerRole, "")
	present := func(own string) bool {
		var yes bool
		require.NoError(t, writer.QueryRow(ctx, postgres.ListenerPresenceSQL, prefix, own).Scan(&yes))
		return yes
	}
	mine, theirs := prefix+"00000000000000aa", prefix+"00000000000000bb"
	assert.False(t, present(mine), "nobody listens yet")
	listener := connect(listenerRole, theirs+" billing - 10.0.0.7:5432")
	assert.True(t, present(mine), "a listener of another login is seen")
	assert.False(t, present(theirs), "the store's own listener is not another's")
	require.NoError(t, listener.Close(ctx))
	require.Eventually(t, func() bool { return !present(mine) }, 5*time.Second, 20*time.Millisecond, "a listener that left is gone")
}

// TestListenerNamesAreShortASCII: a listener's name starts the same in
// every process for one channel, is the store's own after that, and fits
// PostgreSQL's 63 bytes in printable ASCII, whatever the channel.
func TestListenerNamesAreShortASCII(t *testing.T) {
	a, b := postgres.ListenerPrefix("cairn_events_a"), postgres.ListenerPrefix("ünïcödé "+strings.Repeat("x", 50))
	assert.NotEqual(t, a, b)
	assert.Equal(t, a, postgres.ListenerPrefix("cairn_events_a"), "the same in every process")
	s1 := newStore(t, postgres.Options{Channel: "ünïcödé " + strings.Repeat("x", 50)})
	s2 := newStore(t, postgres.Options{Channel: "ünïcödé " + strings.Repeat("x", 50)})
	assert.NotEqual(t, s1.ListenerName(), s2.ListenerName(), "each store's own")
	for _, name := range []string{s1.ListenerName(), s2.ListenerName()} {
		assert.True(t, strings.HasPrefix(name, b), name)
		assert.LessOrEqual(t, len(name), 63)
		for _, r := range name {
			assert.True(t, r > ' ' && r < 0x7f, "%q is printable ASCII", name)
		}
	}
}
