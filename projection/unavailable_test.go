package projection_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/projection"
	"github.com/cairn-es/cairn/projection/projectiontest"
)

// unavailableCheckpoints is a checkpoint store that is unavailable for its
// first saves, as a SQLite file is while another process holds its lock
// past the busy timeout, then fails once for good if told to.
type unavailableCheckpoints struct {
	*memory.Store
	unavailable atomic.Int64
	broken      atomic.Bool
}

func (s *unavailableCheckpoints) SaveCheckpoint(ctx context.Context, name string, expected, next eventstore.Position, fence storekit.Fence) error {
	if s.unavailable.Add(-1) >= 0 {
		return fmt.Errorf("save checkpoint %q: %w", name, eventstore.ErrUnavailable)
	}
	if s.broken.Load() {
		return fmt.Errorf("save checkpoint %q: the disk is gone", name)
	}
	return s.Store.SaveCheckpoint(ctx, name, expected, next, fence)
}

// TestRunStartsOverWhileTheStoreIsUnavailable: a store error that matches
// eventstore.ErrUnavailable does not end Run, which starts over after a
// pause and handles every event when the store is back; any other store
// error still ends it. Found by the two-deployments test (issue 14): a
// deployment's read model took over a lease while the former holder's
// transaction still held the SQLite file's lock, waited out its busy
// timeout, and Run returned, stopping the deployment.
func TestRunStartsOverWhileTheStoreIsUnavailable(t *testing.T) {
	ctx := context.Background()
	events := memory.New()
	t.Cleanup(func() { _ = events.Close() })
	var last eventstore.Position
	for i := range 10 {
		res, err := events.Append(ctx, "item-1", eventstore.Any,
			eventstore.EventData{Type: "ptest.item", SchemaVersion: 1, Data: fmt.Appendf(nil, `{"n":%d}`, i)})
		require.NoError(t, err)
		last = res.Position
	}
	checkpoints := &unavailableCheckpoints{Store: memory.New()}
	checkpoints.unavailable.Store(3)
	var handled atomic.Int64
	c, err := projection.New("p", events, projectiontest.Registry(t), checkpoints,
		func(context.Context, codec.Decoded) error { handled.Add(1); return nil }, projection.Options{Logger: discard()})
	require.NoError(t, err)

	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- c.Run(runCtx) }()
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, c.WaitFor(waitCtx, last))
	// At least once, as a plain consumer's effects are: a batch whose
	// checkpoint did not move is handled again.
	assert.GreaterOrEqual(t, handled.Load(), int64(10), "every event")
	assert.Negative(t, checkpoints.unavailable.Load(), "the unavailable saves were all tried")

	// Another failure of the store ends Run with it.
	checkpoints.broken.Store(true)
	_, err = events.Append(ctx, "item-1", eventstore.Any, eventstore.EventData{Type: "ptest.item", SchemaVersion: 1, Data: []byte(`{"n":10}`)})
	require.NoError(t, err)
	select {
	case err := <-ran:
		require.ErrorContains(t, err, "the disk is gone")
		assert.NotErrorIs(t, err, eventstore.ErrUnavailable)
	case <-waitCtx.Done():
		stop()
		require.FailNow(t, "Run went on after a store failure that is not ErrUnavailable")
	}
	stop()
}
