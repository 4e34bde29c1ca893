package commandtest

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/internal/check"
)

// recentIndex is a command index that takes "a redelivery is usually
// recent" too far: it looks at the stream's newest event only, and
// answers "not found" for a command further back, which the bus then
// decides and appends again.
type recentIndex struct{ *memory.Store }

func (s recentIndex) CommandResult(ctx context.Context, stream, commandID string) (eventstore.AppendResult, bool, error) {
	for e, err := range s.Store.ReadStream(ctx, stream, eventstore.ReadOptions{From: eventstore.End, Backward: true, Limit: 1}) {
		if err != nil || e.Metadata.CommandID != commandID {
			return eventstore.AppendResult{}, false, err
		}
		return s.Store.CommandResult(ctx, stream, commandID)
	}
	return eventstore.AppendResult{}, false, nil
}

// The suite must fail a store whose command index misses a redelivered
// command, and pass the memory store itself on the same case.
func TestFailsBrokenCommandIndex(t *testing.T) {
	run := func(s eventstore.Store) []string {
		return check.Record(t, func(t testing.TB) { testRedeliveredBelowSnapshot(t, newEnv(t, s), s) })
	}
	mem := memory.New()
	t.Cleanup(func() { _ = mem.Close() })
	failures := run(recentIndex{mem})
	t.Logf("the suite reported: %s", strings.Join(failures, "\n"))
	require.NotEmpty(t, failures, "the suite passed a command index that misses older commands")
	// The bus decides the old command again; its events, whose IDs derive
	// from the command ID, are refused as already stored at another
	// version, and the dispatch fails naming the command.
	assert.Contains(t, failures[0], `_old" on stream`)

	assert.Empty(t, run(mem))
}
