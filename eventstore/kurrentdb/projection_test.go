package kurrentdb_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/kurrentdb/internal/testserver"
	"github.com/cairn-es/cairn/projection"
	"github.com/cairn-es/cairn/retry"
)

// Counted is the event the plain projection counts.
type Counted struct{ N int }

// TestPlainProjectionKeepsItsStateInKurrentDB runs the plain consumer with
// its checkpoint, lease and dead letters in KurrentDB, as a service that
// keeps everything there does: two processes' consumers of one name race
// for the lease while events arrive and the server drops subscriptions;
// an idempotent handler (a set keyed by event ID) sees every event, the
// poison one parked once, and the checkpoint reaches the last event.
func TestPlainProjectionKeepsItsStateInKurrentDB(t *testing.T) {
	srv := testserver.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[Counted](reg, "counted", 1))
	writer := open(t, srv.URL())

	var mu sync.Mutex
	seen := make(map[uuid.UUID]int) // the read model: idempotent by event ID
	handler := func(_ context.Context, d codec.Decoded) error {
		if d.Value.(Counted).N == 13 {
			return errors.New("poison")
		}
		mu.Lock()
		defer mu.Unlock()
		seen[d.Event.ID]++
		return nil
	}
	const total = 120
	runs := make(chan error, 2)
	run, stop := context.WithCancel(ctx)
	var consumers []*projection.Consumer
	for i := range 2 {
		s := open(t, srv.URL()) // a process of its own
		c, err := projection.New("counter", s, reg, s, handler, projection.Options{
			Filter: eventstore.Filter{Types: []string{"counted"}}, BatchSize: 7, Exclusive: true,
			LeaseTTL: time.Second, Holder: fmt.Sprintf("process-%d", i), Retry: retry.Policy{Attempts: 2, Initial: time.Millisecond},
			Logger: quiet(),
		})
		require.NoError(t, err)
		consumers = append(consumers, c)
		go func() { runs <- c.Run(run) }()
	}
	var last eventstore.AppendResult
	for i := range total {
		data := fmt.Appendf(nil, `{"N":%d}`, i)
		var err error
		last, err = writer.Append(ctx, fmt.Sprintf("count-%d", i%5), eventstore.Any, eventstore.EventData{Type: "counted", SchemaVersion: 1, Data: data})
		require.NoError(t, err)
		if i%40 == 0 {
			srv.DropSubscriptions()
		}
	}
	for _, c := range consumers {
		require.NoError(t, c.WaitFor(ctx, last.Position))
	}
	stop()
	for range consumers {
		<-runs
	}

	mu.Lock()
	defer mu.Unlock()
	assert.Len(t, seen, total-1, "every event but the poison one was applied")
	var parked []eventstore.DeadLetter
	for d, err := range consumers[0].DeadLetters(ctx) {
		require.NoError(t, err)
		parked = append(parked, d)
	}
	require.Len(t, parked, 1, "the poison event is parked, once")
	assert.Equal(t, `{"N":13}`, string(parked[0].Event.Data))
}

// quiet is a logger for consumers whose records the test does not read.
func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
