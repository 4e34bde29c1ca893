package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
)

// TestAConflictInAGroupFailsNoOtherAppend has concurrent single-event
// appends, which share transactions (group commit), half of them with a
// wrong expected version or a repeated event ID: each gets what it would
// alone, and every right one is written once, in version order.
func TestAConflictInAGroupFailsNoOtherAppend(t *testing.T) {
	s := newStore(t, postgres.Options{})
	ctx := context.Background()
	const writers, rounds = 16, 20
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream := fmt.Sprintf("group-%d", w)
			for v := range uint64(rounds) {
				e := eventstore.EventData{ID: eventstore.NewEventID(), Type: "t", SchemaVersion: 1, Data: []byte(`{}`)}
				expected := eventstore.NoStream
				if v > 0 {
					expected = eventstore.Exact(v - 1)
				}
				if w%2 == 1 {
					// A wrong version first: it must fail alone.
					_, err := s.Append(ctx, stream, eventstore.Exact(v+5), e)
					var wrong *eventstore.WrongVersionError
					if !assert.True(t, errors.As(err, &wrong), "writer %d round %d: %v", w, v, err) {
						return
					}
				}
				r, err := s.Append(ctx, stream, expected, e)
				if !assert.NoError(t, err, "writer %d round %d", w, v) || !assert.Equal(t, v, r.FirstVersion) {
					return
				}
				if w%4 == 1 {
					// The same event again: a duplicate, at its place.
					again, err := s.Append(ctx, stream, expected, e)
					if !assert.NoError(t, err) || !assert.True(t, again.Duplicate) || !assert.Equal(t, r.Position, again.Position) {
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	for w := range writers {
		var versions []uint64
		for e, err := range s.ReadStream(ctx, fmt.Sprintf("group-%d", w), eventstore.Forward(0)) {
			require.NoError(t, err)
			versions = append(versions, e.Version)
		}
		require.Len(t, versions, rounds, "writer %d", w)
	}
	var last eventstore.Position
	seen := map[string]uint64{}
	for e, err := range s.ReadAll(ctx, eventstore.Position{}, eventstore.Filter{}) {
		require.NoError(t, err)
		require.True(t, last.Before(e.Position), "global order")
		last = e.Position
		if v, ok := seen[e.StreamID]; ok {
			require.Equal(t, v+1, e.Version, "stream %s out of version order in ReadAll", e.StreamID)
		}
		seen[e.StreamID] = e.Version
	}
}
