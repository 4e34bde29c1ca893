package memory_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/eventstore/storetest"
)

func TestSnapshotConformance(t *testing.T) {
	storetest.RunSnapshots(t, func(t *testing.T) storekit.SnapshotStore {
		return memory.New()
	})
}

func TestCommandIndexConformance(t *testing.T) {
	storetest.RunCommandIndex(t, func(t *testing.T) storetest.IndexedStore {
		s := memory.New()
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

// TestCommandResultOnClosedStore adds to the conformance suite what only
// the memory store can be asked without a server: a closed store refuses.
func TestCommandResultOnClosedStore(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	_, err := s.Append(ctx, "c-1", eventstore.NoStream, eventstore.EventData{ID: uuid.New(), Type: "x", Data: []byte("{}"), Metadata: eventstore.Metadata{CommandID: "a"}})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, _, err = s.CommandResult(ctx, "c-1", "a")
	assert.ErrorIs(t, err, eventstore.ErrClosed)
}
