package projectiontest

import (
	"context"
	"testing"
	"time"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/check"
	"github.com/cairn-es/cairn/projection"
)

// testWaitFor checks read-your-writes: WaitFor returns once the read model
// shows the append, not before; it does not hang on a position whose last
// events the filter leaves out; and a consumer that runs nowhere makes it
// return ctx's error.
func testWaitFor[Tx any](t testing.TB, h Harness[Tx]) {
	st := h.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg := Registry(t)
	slow := make(chan struct{})
	c, err := projection.NewTx("wait", st.Events, reg, st.Consumers,
		projection.TypedTx(func(ctx context.Context, tx Tx, _ Item, _ codec.Decoded) error {
			<-slow
			return h.Add(ctx, tx, "items", 1)
		}), projection.Options{Filter: eventstore.Filter{StreamPrefixes: []string{"item-"}}, BatchSize: 1, Logger: quiet()})
	check.NoError(t, err)

	short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
	defer stop()
	appendItems(t, st.Events, "item-a", 0, 2, 0)
	var res eventstore.Event
	for ev, err := range st.Events.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		check.NoError(t, err)
		res = ev
	}
	check.ErrorIs(t, c.WaitFor(short, res.Position), context.DeadlineExceeded, "no consumer runs: it waits until ctx ends")

	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	waited := make(chan error, 1)
	go func() { waited <- c.WaitFor(ctx, res.Position) }()
	select {
	case err := <-waited:
		t.Fatalf("WaitFor returned %v before the handler ran", err)
	case <-time.After(20 * time.Millisecond):
	}
	close(slow)
	check.NoError(t, <-waited)
	check.Equal(t, h.Get(t, st, "items"), 2, "once WaitFor returns, the read model shows the append")

	// Events the filter leaves out do not hold WaitFor back.
	other, err := st.Events.Append(ctx, "other-a", eventstore.Any,
		eventstore.EventData{Type: "ptest.item", SchemaVersion: 1, Data: []byte(`{"n":2}`)})
	check.NoError(t, err)
	bounded, stop2 := context.WithTimeout(ctx, 10*time.Second)
	defer stop2()
	check.NoError(t, c.WaitFor(bounded, other.Position))
	cancel()
	check.NoError(t, <-done)
}
