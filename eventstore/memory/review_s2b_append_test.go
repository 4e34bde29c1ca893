package memory_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
)

// TestReviewS2bAppendSharesNothing: the memory store's append copies live
// in a stack array of four; whatever the size of the append, mutating the
// caller's data and Extra maps afterwards must not change stored events.
func TestReviewS2bAppendSharesNothing(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	t.Cleanup(func() { _ = s.Close() })
	for _, n := range []int{1, 2, 3, 4, 5, 8, 17, 1000, 10_000} {
		stream := fmt.Sprintf("n-%d", n)
		events := make([]eventstore.EventData, n)
		for i := range events {
			events[i] = eventstore.EventData{Type: "t", Data: []byte(fmt.Sprintf(`{"i":%d}`, i)),
				Metadata: eventstore.Metadata{Extra: map[string]string{"i": fmt.Sprint(i)}}}
		}
		// Two events share one backing array and one map, as a caller's may.
		if n >= 2 {
			shared := []byte(`{"shared":1}`)
			events[0].Data, events[1].Data = shared[:6:6], shared
			events[1].Metadata.Extra = events[0].Metadata.Extra
		}
		want := make([]eventstore.EventData, n)
		for i, e := range events {
			want[i] = e
			want[i].Data = bytes.Clone(e.Data)
			want[i].Metadata = e.Metadata.Clone()
		}
		_, err := s.Append(ctx, stream, eventstore.NoStream, events...)
		require.NoError(t, err)
		for i := range events {
			for j := range events[i].Data {
				events[i].Data[j] = 'X'
			}
			events[i].Data = append(events[i].Data, "more"...)
			events[i].Metadata.Extra["i"] = "changed"
			events[i].Metadata.Extra["new"] = "y"
			events[i].Type = "changed"
		}
		clear(events)
		i := 0
		for e, err := range s.ReadStream(ctx, stream, eventstore.Forward(0)) {
			require.NoError(t, err)
			require.Equal(t, want[i].Data, e.Data, "append of %d: event %d's data changed with the caller's", n, i)
			require.Equal(t, want[i].Metadata.Extra, e.Metadata.Extra, "append of %d: event %d's metadata changed with the caller's", n, i)
			require.Equal(t, "t", e.Type)
			i++
		}
		require.Equal(t, n, i)
		// The events read share nothing with one another either.
		all := collect(t, s, stream)
		if n >= 2 {
			all[0].Metadata.Extra["i"] = "mine"
			all[0].Data[0] = 'Z'
			again := collect(t, s, stream)
			require.Equal(t, want[1].Metadata.Extra, all[1].Metadata.Extra, "two events read share their Extra map")
			require.Equal(t, want[0].Data, again[0].Data)
			require.Equal(t, want[0].Metadata.Extra, again[0].Metadata.Extra)
		}
	}
}

func collect(t *testing.T, s eventstore.Store, stream string) []eventstore.Event {
	var out []eventstore.Event
	for e, err := range s.ReadStream(context.Background(), stream, eventstore.Forward(0)) {
		require.NoError(t, err)
		out = append(out, e)
	}
	return out
}

// TestReviewS2bAppendRefusedWhole: an invalid event anywhere in an append
// (inside and past the stack array of four) refuses it whole, with the
// typed error naming the event.
func TestReviewS2bAppendRefusedWhole(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	t.Cleanup(func() { _ = s.Close() })
	for _, n := range []int{1, 4, 5, 20, 10_000} {
		for _, bad := range []int{0, n / 2, n - 1} {
			events := make([]eventstore.EventData, n)
			for i := range events {
				events[i] = eventstore.EventData{Type: "t", Data: []byte("{}")}
			}
			events[bad].Data = nil
			stream := fmt.Sprintf("bad-%d-%d", n, bad)
			_, err := s.Append(ctx, stream, eventstore.Any, events...)
			var iae *eventstore.InvalidArgumentError
			require.True(t, errors.As(err, &iae), "append of %d, event %d bad: %v", n, bad, err)
			require.ErrorIs(t, err, eventstore.ErrInvalidArgument)
			require.Equal(t, bad, iae.Index)
			require.Equal(t, "data", iae.Field)
			require.Empty(t, collect(t, s, stream))

			// A repeated ID, and a type with a reserved prefix.
			events[bad].Data = []byte("{}")
			id := eventstore.NewEventID()
			events[0].ID, events[n-1].ID = id, id
			if n > 1 {
				_, err = s.Append(ctx, stream, eventstore.Any, events...)
				require.True(t, errors.As(err, &iae), "%v", err)
				require.Equal(t, n-1, iae.Index)
				require.Equal(t, "id", iae.Field)
				require.Empty(t, collect(t, s, stream))
			}
		}
	}
	_, err := s.Append(ctx, "x-1", eventstore.Any, make([]eventstore.EventData, 10_001)...)
	require.ErrorIs(t, err, eventstore.ErrInvalidArgument)
}
