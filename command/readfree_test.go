package command_test

import (
	"context"
	"fmt"
	"iter"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/command/commandtest"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
)

// readCountingStore counts what a dispatch asks of the store besides its
// append: stream reads and command lookups.
type readCountingStore struct {
	*memory.Store
	reads, lookups atomic.Int64
}

func (s *readCountingStore) ReadStream(ctx context.Context, stream string, opts eventstore.ReadOptions) iter.Seq2[eventstore.Event, error] {
	s.reads.Add(1)
	return s.Store.ReadStream(ctx, stream, opts)
}

func (s *readCountingStore) CommandResult(ctx context.Context, stream, commandID string) (eventstore.AppendResult, bool, error) {
	s.lookups.Add(1)
	return s.Store.CommandResult(ctx, stream, commandID)
}

// TestCachedCommandsReadNothing: once an aggregate is cached, a new command
// that appends costs its append and nothing else, however many commands the
// aggregate has had (more than an instance remembers): no read to refresh
// the cached state (the append's expected version catches a stale one) and
// no lookup of the command ID (the store's event-ID check catches an old
// one).
func TestCachedCommandsReadNothing(t *testing.T) {
	ctx := context.Background()
	store := &readCountingStore{Store: memory.New()}
	t.Cleanup(func() { _ = store.Close() })
	reg, err := crashRegistry()
	require.NoError(t, err)
	typ, err := aggregate.NewType[commandtest.Counter]("counter", aggregate.Options[commandtest.Counter]{}, commandtest.CounterBindings()...)
	require.NoError(t, err)
	bus := command.New(store, reg, command.Options{})
	require.NoError(t, command.Route[commandtest.Increment](bus, typ))

	_, err = bus.Dispatch(ctx, command.Message{ID: "c0", Command: commandtest.Increment{ID: "hot"}})
	require.NoError(t, err)
	store.reads.Store(0)
	const commands = 1500 // past the 1,024 an instance remembers
	for i := 1; i <= commands; i++ {
		_, err := bus.Dispatch(ctx, command.Message{ID: fmt.Sprint("c", i), Command: commandtest.Increment{ID: "hot"}})
		require.NoError(t, err)
	}
	assert.Zero(t, store.reads.Load(), "stream reads")
	assert.Zero(t, store.lookups.Load(), "command lookups")

	again, err := bus.Dispatch(ctx, command.Message{ID: "c3", Command: commandtest.Increment{ID: "hot"}})
	require.NoError(t, err)
	assert.True(t, again.Duplicate, "a forgotten command is still found: its append is refused, then it is looked up")
	assert.Equal(t, uint64(3), again.Version)
	assert.Equal(t, 1, again.Attempts, "a refusal of the command's own events is no retry")
}
