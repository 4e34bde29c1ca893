package postgres_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
)

// readCounter counts the queries that read the events table.
type readCounter struct{ reads atomic.Int64 }

func (c *readCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.Contains(data.SQL, "SELECT") && strings.Contains(data.SQL, ".events") {
		c.reads.Add(1)
	}
	return ctx
}

func (c *readCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// countingStore opens a store in a fresh schema on a pool whose queries
// are counted.
func countingStore(t *testing.T, opts postgres.Options) (*postgres.Store, *readCounter) {
	counter := &readCounter{}
	return tracedStore(t, opts, counter), counter
}

// tracedStore opens a store on a pool of its own whose queries go to
// tracer, in a fresh schema unless opts names one; the schema is dropped
// at cleanup.
func tracedStore(t *testing.T, opts postgres.Options, tracer pgx.QueryTracer) *postgres.Store {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(server.URL)
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	if opts.Schema == "" {
		opts.Schema = server.NewSchema("notify")
	}
	s, err := postgres.New(ctx, pool, opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, s.Close())
		pool.Close()
		dropSchema(t, opts.Schema)
	})
	return s
}

// TestANotificationFloodIsCoalesced: any login of the database may send
// notifications on a store's channel, and each woke every subscriber,
// which read once per notification (8 idle subscribers went from 64 to
// 39,432 reads in 2 s). Notifications now share wake-ups: each subscriber
// reads at most once per WakeInterval however many arrive.
func TestANotificationFloodIsCoalesced(t *testing.T) {
	const (
		subscribers = 8
		interval    = 50 * time.Millisecond
		flood       = time.Second
	)
	s, counter := countingStore(t, postgres.Options{Channel: "flooded_" + strings.ReplaceAll(server.NewSchema("c"), "-", "_"),
		WakeInterval: interval, PollInterval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range subscribers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, err := range s.Subscribe(ctx, eventstore.Start, eventstore.Filter{}) {
				if err != nil {
					return
				}
			}
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	time.Sleep(300 * time.Millisecond) // every subscriber has read once, and LISTENs

	sender := newPoolOnce(t)
	before := counter.reads.Load()
	sent := 0
	for start := time.Now(); time.Since(start) < flood; sent++ {
		_, err := sender.Exec(context.Background(), `SELECT pg_notify($1, '')`, s.Channel())
		require.NoError(t, err)
	}
	time.Sleep(2 * interval)
	reads := counter.reads.Load() - before
	limit := int64(subscribers * (int(flood/interval) + 3))
	t.Logf("%d notifications in %s: %d reads by %d subscribers (at most %d)", sent, flood, reads, subscribers, limit)
	require.Greater(t, sent, 200, "the flood is too small to tell")
	assert.Positive(t, reads, "the notifications woke no subscriber")
	assert.LessOrEqual(t, reads, limit, "subscribers read once per notification, not once per interval")
}

// TestAChosenChannelCarriesTheWakeUps: two stores of one schema, in two
// processes' stead, on a channel of their own: an append in one wakes a
// subscriber of the other at once (it would otherwise wait an hour's poll).
func TestAChosenChannelCarriesTheWakeUps(t *testing.T) {
	schema := server.NewSchema("chan")
	opts := postgres.Options{Schema: schema, Channel: "cairn_chosen_" + strings.ReplaceAll(schema, "-", "_"), PollInterval: time.Hour}
	writer := newStore(t, opts)
	reader, err := postgres.Open(context.Background(), server.URL, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = reader.Close() })
	assert.Equal(t, opts.Channel, reader.Channel())

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan eventstore.Event, 1)
	go func() {
		for ev, err := range reader.Subscribe(ctx, eventstore.Start, eventstore.Filter{}) {
			if err == nil {
				got <- ev
			}
			return
		}
	}()
	time.Sleep(300 * time.Millisecond)
	_, err = writer.Append(ctx, "order-1", eventstore.NoStream, eventstore.EventData{Type: "order.placed", Data: []byte(`{}`)})
	require.NoError(t, err)
	select {
	case ev := <-got:
		assert.Equal(t, "order-1", ev.StreamID)
	case <-time.After(5 * time.Second):
		t.Fatal("the other store's subscriber was not woken on the chosen channel")
	}
}

// TestBadChannelsAreRefused: a channel name PostgreSQL cannot take is
// refused before anything reaches the server.
func TestBadChannelsAreRefused(t *testing.T) {
	for _, ch := range []string{strings.Repeat("c", 64), "bad\x00name", "bad\xff"} {
		_, err := postgres.Open(context.Background(), server.URL, postgres.Options{Schema: server.NewSchema("badchan"), Channel: ch})
		require.ErrorIs(t, err, eventstore.ErrInvalidArgument, "channel %q", ch)
		var bad *eventstore.InvalidArgumentError
		require.ErrorAs(t, err, &bad)
		assert.Equal(t, "channel", bad.Field)
	}
}
