package storetest

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/check"
)

// The suite must fail stores with the bugs a store author could make:
// these wrap the memory store with one such bug each, run the case that
// checks it under a testing.TB that records failures, and expect the
// failure that names the bug.

// uncheckedAppends forgets the expected version: every append goes
// through as Any, the lost update an optimistic lock exists to prevent.
type uncheckedAppends struct{ *memory.Store }

func (s uncheckedAppends) Append(ctx context.Context, stream string, _ eventstore.ExpectedVersion, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	return s.Store.Append(ctx, stream, eventstore.Any, events...)
}

// unfencedCheckpoints compares the expected position but not the fence,
// so that a paused former holder moves the checkpoint of its successor.
type unfencedCheckpoints struct{ *memory.Store }

func (s unfencedCheckpoints) SaveCheckpoint(ctx context.Context, name string, expected, next eventstore.Position, fence storekit.Fence) error {
	stored, err := s.Store.Checkpoint(ctx, name)
	if err != nil {
		return err
	}
	return s.Store.SaveCheckpoint(ctx, name, expected, next, max(fence, stored.Fence))
}

func TestFailsBrokenStores(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t testing.TB, s *memory.Store)
		want string // in the first failure
	}{
		{"AppendIgnoresExpectedVersion", func(t testing.TB, s *memory.Store) {
			testExpectedOnExisting(t, uncheckedAppends{s})
		}, "no wrong-version error"},
		{"CheckpointIgnoresFence", func(t testing.TB, s *memory.Store) {
			testCheckpointFencing(t, unfencedCheckpoints{s})
		}, "got no error, want one that matches checkpoint is fenced"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := memory.New()
			t.Cleanup(func() { _ = s.Close() })
			failures := check.Record(t, func(t testing.TB) { tc.run(t, s) })
			t.Logf("the suite reported: %s", strings.Join(failures, "\n"))
			require.NotEmpty(t, failures, "the suite passed a broken store")
			assert.Contains(t, failures[0], tc.want)
		})
	}
}

// The same cases pass the memory store itself: the failures above come
// from the bugs.
func TestPassesTheMemoryStore(t *testing.T) {
	s := memory.New()
	t.Cleanup(func() { _ = s.Close() })
	assert.Empty(t, check.Record(t, func(t testing.TB) { testExpectedOnExisting(t, s) }))
	assert.Empty(t, check.Record(t, func(t testing.TB) { testCheckpointFencing(t, s) }))
}
