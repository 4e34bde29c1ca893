package projection_test

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/internal/batchconsumer"
	"github.com/cairn-es/cairn/projection"
)

// TestSettleWaitsForTheWholeCascade: issue 23, item 6. One consumer turns
// each "ping" into a "pong" stored elsewhere, up to a depth; a second
// counts the pongs. WaitFor of the position of the first ping returns
// before the pongs it causes are counted; Settle returns only once the
// whole cascade is through.
func TestSettleWaitsForTheWholeCascade(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	consumers := memory.New()
	quiet := projection.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}

	const depth = 20
	echo := quiet
	echo.Filter = eventstore.Filter{Types: []string{"ping"}}
	echoes, err := batchconsumer.New[*projection.Consumer]("echo", store, consumers, func(ctx context.Context, evs []eventstore.Event) error {
		for _, ev := range evs {
			if ev.Version+1 >= depth {
				continue
			}
			time.Sleep(time.Millisecond) // a handler that takes a while
			_, err := store.Append(ctx, ev.StreamID, eventstore.Exact(ev.Version), eventstore.EventData{Type: "ping", Data: []byte("{}")})
			if err != nil {
				return err
			}
		}
		return nil
	}, nil, echo)
	require.NoError(t, err)
	var counted atomic.Int64
	count := quiet
	count.Filter = eventstore.Filter{Types: []string{"ping"}}
	counter, err := batchconsumer.New[*projection.Consumer]("count", store, consumers, func(_ context.Context, evs []eventstore.Event) error {
		counted.Add(int64(len(evs)))
		return nil
	}, nil, count)
	require.NoError(t, err)
	done := make(chan error, 2)
	for _, c := range []*projection.Consumer{echoes, counter} {
		go func() { done <- c.Run(ctx) }()
	}
	t.Cleanup(func() {
		stop()
		for range 2 {
			assert.NoError(t, <-done)
		}
	})

	res, err := store.Append(ctx, "chain-1", eventstore.NoStream, eventstore.EventData{Type: "ping", Data: []byte("{}")})
	require.NoError(t, err)
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, counter.WaitFor(wait, res.Position))
	assert.Less(t, counted.Load(), int64(depth), "WaitFor waits for what was stored, not for what it causes")

	require.NoError(t, projection.Settle(wait, store, echoes, counter))
	assert.Equal(t, int64(depth), counted.Load(), "Settle waits for the whole cascade")
}
