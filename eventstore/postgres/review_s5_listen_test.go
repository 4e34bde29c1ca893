package postgres_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
)

// Review s5: attacks on "NOTIFY only while another store listens".

// reviewS5Deliver bounds how long a subscriber that polls hourly may take
// to see an append: what is checked is that a wake-up reaches it at all
// (one lost would leave it an hour). Deliveries take milliseconds; one
// took over a second under the race detector in a CI run on a loaded
// machine, which a latency bound here would call a failure: speed is for
// the benchmarks to measure.
const reviewS5Deliver = 5 * time.Second

func reviewS5Quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// reviewS5Store opens a store on its own pool (another process's stand-in)
// without dropping the schema at cleanup (the test does that once).
func reviewS5Store(t *testing.T, opts postgres.Options) *postgres.Store {
	t.Helper()
	if opts.PollInterval == 0 {
		opts.PollInterval = time.Hour
	}
	opts.Logger = reviewS5Quiet()
	s, err := postgres.Open(context.Background(), server.URL, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func reviewS5Schema(t *testing.T, prefix string) string {
	schema := server.NewSchema(prefix)
	t.Cleanup(func() { dropSchema(t, schema) })
	return schema
}

// reviewS5ListenerPIDs returns the backends named as listeners of channel.
func reviewS5ListenerPIDs(t *testing.T, admin interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, channel string) []int64 {
	t.Helper()
	rows, err := admin.Query(context.Background(), `SELECT pid FROM pg_stat_activity WHERE starts_with(application_name, $1)`, postgres.ListenerPrefix(channel))
	require.NoError(t, err)
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	return pids
}

func reviewS5Expect(t *testing.T, got <-chan string, want string, what string) {
	t.Helper()
	deadline := time.After(reviewS5Deliver)
	for {
		select {
		case s := <-got:
			if s == want {
				return
			}
		case <-deadline:
			t.Fatalf("%s: %q not delivered within %s (subscriber polls hourly)", what, want, reviewS5Deliver)
		}
	}
}

// TestReviewS5_AlwaysNotifyReachesAPlainListener: a LISTEN on the store's
// channel that is not a Cairn listener of this version (a store of the
// previous release during a rolling upgrade, or an outside consumer of the
// documented Options.Channel) was no longer notified at all; with
// Options.AlwaysNotify (documented for them) it is.
func TestReviewS5_AlwaysNotifyReachesAPlainListener(t *testing.T) {
	ctx := context.Background()
	schema := reviewS5Schema(t, "s5raw")
	a := reviewS5Store(t, postgres.Options{Schema: schema, AlwaysNotify: true})
	conn, err := pgx.Connect(ctx, server.URL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(ctx) })
	_, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{a.Channel()}.Sanitize())
	require.NoError(t, err)
	time.Sleep(50 * time.Millisecond)
	for i := range 3 {
		appendOne(t, a, fmt.Sprint("raw-", i))
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := conn.WaitForNotification(wctx)
		cancel()
		require.NoError(t, err, "append %d: no NOTIFY on channel %q reached a plain LISTEN", i, a.Channel())
	}
}

// TestReviewS5_Interleavings: a subscriber of store B (hourly poll) is
// woken for every append of store A, whatever the order (within
// reviewS5Deliver; in milliseconds on a quiet machine).
func TestReviewS5_Interleavings(t *testing.T) {
	for _, delay := range []time.Duration{300 * time.Millisecond, 1100 * time.Millisecond} {
		t.Run(fmt.Sprint("listener-after-first-append-", delay), func(t *testing.T) {
			schema := reviewS5Schema(t, "s5il")
			a := reviewS5Store(t, postgres.Options{Schema: schema})
			b := reviewS5Store(t, postgres.Options{Schema: schema})
			appendOne(t, a, "first")
			time.Sleep(delay)
			got := subscribeFirst(t, b, eventstore.Start)
			reviewS5Expect(t, got, "first", "catch-up")
			for i := range 22 { // 2.2 s of appends: through the trust window, the warm-up, and after them
				appendOne(t, a, fmt.Sprint("e-", i))
				reviewS5Expect(t, got, fmt.Sprint("e-", i), "append")
				time.Sleep(100 * time.Millisecond)
			}
		})
	}

	t.Run("reconnect-after-terminate", func(t *testing.T) {
		ctx := context.Background()
		admin := newPoolOnce(t)
		schema := reviewS5Schema(t, "s5rc")
		a := reviewS5Store(t, postgres.Options{Schema: schema})
		b := reviewS5Store(t, postgres.Options{Schema: schema})
		got := subscribeFirst(t, b, eventstore.Start)
		require.Eventually(t, func() bool { return len(reviewS5ListenerPIDs(t, admin, b.Channel())) == 1 }, 5*time.Second, 10*time.Millisecond)
		for round := range 2 {
			time.Sleep(time.Duration(round) * 700 * time.Millisecond)
			appendOne(t, a, fmt.Sprint("pre-", round))
			reviewS5Expect(t, got, fmt.Sprint("pre-", round), "before the kill")
			_, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE starts_with(application_name, $1)`, postgres.ListenerPrefix(b.Channel()))
			require.NoError(t, err)
			for i := range 15 {
				appendOne(t, a, fmt.Sprintf("r%d-%d", round, i))
				reviewS5Expect(t, got, fmt.Sprintf("r%d-%d", round, i), "around the reconnect")
				time.Sleep(100 * time.Millisecond)
			}
		}
	})

	t.Run("B-closes-Bprime-starts", func(t *testing.T) {
		schema := reviewS5Schema(t, "s5bb")
		a := reviewS5Store(t, postgres.Options{Schema: schema})
		for round := range 2 {
			b := reviewS5Store(t, postgres.Options{Schema: schema})
			got := subscribeFirst(t, b, eventstore.Start)
			for i := range 15 {
				appendOne(t, a, fmt.Sprintf("b%d-%d", round, i))
				reviewS5Expect(t, got, fmt.Sprintf("b%d-%d", round, i), "B generation")
				time.Sleep(100 * time.Millisecond)
			}
			require.NoError(t, b.Close())
			time.Sleep(time.Duration(round+1) * 600 * time.Millisecond)
		}
	})

	t.Run("AppendTx-and-Notify", func(t *testing.T) {
		ctx := context.Background()
		schema := reviewS5Schema(t, "s5tx")
		a := reviewS5Store(t, postgres.Options{Schema: schema})
		b := reviewS5Store(t, postgres.Options{Schema: schema})
		appendOne(t, a, "first") // A looks and finds nobody
		got := subscribeFirst(t, b, eventstore.Start)
		reviewS5Expect(t, got, "first", "catch-up")
		for i := range 15 {
			stream := fmt.Sprint("tx-", i)
			require.NoError(t, a.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
				_, err := a.AppendTx(ctx, tx, stream, eventstore.Any, eventstore.EventData{Type: "t", Data: []byte(`{}`)})
				return err
			}))
			a.Notify()
			reviewS5Expect(t, got, stream, "AppendTx + Notify")
			time.Sleep(100 * time.Millisecond)
		}
	})

	t.Run("concurrent-appenders", func(t *testing.T) {
		schema := reviewS5Schema(t, "s5cc")
		a := reviewS5Store(t, postgres.Options{Schema: schema})
		b := reviewS5Store(t, postgres.Options{Schema: schema})
		appendOne(t, a, "first")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		seen := make(chan string, 10000)
		go func() {
			for ev, err := range b.Subscribe(ctx, eventstore.Start, eventstore.Filter{}) {
				if err != nil {
					return
				}
				seen <- ev.StreamID
			}
		}()
		for round := range 6 {
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 10 {
						_, err := a.Append(context.Background(), fmt.Sprintf("c%d-%d-%d", round, w, i), eventstore.Any, eventstore.EventData{Type: "t", Data: []byte(`{}`)})
						assert.NoError(t, err)
					}
				}()
			}
			wg.Wait()
			want := map[string]bool{}
			for w := range 4 {
				for i := range 10 {
					want[fmt.Sprintf("c%d-%d-%d", round, w, i)] = true
				}
			}
			deadline := time.After(reviewS5Deliver)
			for len(want) > 0 {
				select {
				case s := <-seen:
					delete(want, s)
				case <-deadline:
					t.Fatalf("round %d: %d events not delivered within %s", round, len(want), reviewS5Deliver)
				}
			}
			time.Sleep(400 * time.Millisecond)
		}
	})

	t.Run("custom-channel-and-two-schemas-sharing-it", func(t *testing.T) {
		s1, s2 := reviewS5Schema(t, "s5ch1"), reviewS5Schema(t, "s5ch2")
		channel := "review s5 shared ünï"
		a := reviewS5Store(t, postgres.Options{Schema: s1, Channel: channel})
		other := reviewS5Store(t, postgres.Options{Schema: s2, Channel: channel})
		_ = subscribeFirst(t, other, eventstore.Start) // a listener of the other schema
		appendOne(t, a, "first")
		time.Sleep(1200 * time.Millisecond)
		b := reviewS5Store(t, postgres.Options{Schema: s1, Channel: channel})
		got := subscribeFirst(t, b, eventstore.Start)
		for i := range 15 {
			appendOne(t, a, fmt.Sprint("ch-", i))
			reviewS5Expect(t, got, fmt.Sprint("ch-", i), "custom channel")
			time.Sleep(100 * time.Millisecond)
		}
	})
}

// TestReviewS5_OwnListenerReconnectingIsNotAnother: with only the store's
// own listener on the channel, no NOTIFY goes out, also while that
// listener reconnects.
func TestReviewS5_OwnListenerReconnectingIsNotAnother(t *testing.T) {
	ctx := context.Background()
	admin := newPoolOnce(t)
	schema := reviewS5Schema(t, "s5own")
	counter := &notifyCounter{}
	s := tracedStore(t, postgres.Options{Schema: schema, PollInterval: time.Hour, Logger: reviewS5Quiet()}, counter)
	s.SetListenerCheck(5 * time.Millisecond) // look often, as many stores in a fleet would, together
	own := subscribeFirst(t, s, eventstore.Start)
	require.Eventually(t, func() bool { return len(reviewS5ListenerPIDs(t, admin, s.Channel())) == 1 }, 5*time.Second, 10*time.Millisecond)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_, err := s.Append(ctx, fmt.Sprint("own-", i%5), eventstore.Any, eventstore.EventData{Type: "t", Data: []byte(`{}`)})
			assert.NoError(t, err)
			time.Sleep(time.Millisecond)
		}
	}()
	go func() {
		for range own {
		}
	}()
	for range 10 {
		_, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE starts_with(application_name, $1)`, postgres.ListenerPrefix(s.Channel()))
		require.NoError(t, err)
		time.Sleep(250 * time.Millisecond) // past the first reconnect's 100 ms backoff
	}
	close(stop)
	wg.Wait()
	assert.Zero(t, counter.notifies.Load(), "NOTIFYs sent while the only listener was the store's own (checks: %d)", counter.checks.Load())
}

// TestReviewS5_CloseDuringWarmUpLeavesNoGoroutines: Close while the
// listener warms up ends the warm-up goroutine and the notify worker.
func TestReviewS5_CloseDuringWarmUpLeavesNoGoroutines(t *testing.T) {
	schema := reviewS5Schema(t, "s5leak")
	before := runtime.NumGoroutine()
	for range 5 {
		s, err := postgres.Open(context.Background(), server.URL, postgres.Options{Schema: schema, PollInterval: time.Hour, Logger: reviewS5Quiet()})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range s.Subscribe(ctx, eventstore.Start, eventstore.Filter{}) {
			}
		}()
		time.Sleep(100 * time.Millisecond) // LISTEN done, warm-up under way
		start := time.Now()
		require.NoError(t, s.Close())
		assert.Less(t, time.Since(start), 2*time.Second, "Close waited for the warm-up")
		<-done
		cancel()
	}
	require.Eventually(t, func() bool { return runtime.NumGoroutine() <= before+2 }, 10*time.Second, 50*time.Millisecond,
		"goroutines: %d before, %d after", before, runtime.NumGoroutine())
}
