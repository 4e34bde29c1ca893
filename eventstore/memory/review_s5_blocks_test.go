package memory

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
)

// Review s5: a refused append writes nothing into the data blocks, and
// what is kept shares no memory with the caller or with readers.
func TestReviewS5_RefusedAppendsWriteNoData(t *testing.T) {
	ctx := context.Background()
	s := New()
	id := uuid.Must(uuid.NewV7())
	ev := eventstore.EventData{ID: id, Type: "t", Data: []byte("payload")}
	_, err := s.Append(ctx, "a", eventstore.NoStream, ev)
	require.NoError(t, err)
	used, n := len(s.data.block), s.log.n
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	refused := map[string]func() error{
		"wrong version": func() error {
			_, err := s.Append(ctx, "a", eventstore.NoStream, eventstore.EventData{Type: "t", Data: []byte("x")})
			return err
		},
		"bad input": func() error {
			_, err := s.Append(ctx, "", eventstore.Any, eventstore.EventData{Type: "t", Data: []byte("x")})
			return err
		},
		"id conflict": func() error {
			_, err := s.Append(ctx, "a", eventstore.Any, eventstore.EventData{ID: id, Type: "t", Data: []byte("payload")}, eventstore.EventData{Type: "t", Data: []byte("zzz")}) // a partial repeat
			return err
		},
		"cancelled": func() error {
			_, err := s.Append(cancelled, "a", eventstore.Any, eventstore.EventData{Type: "t", Data: []byte("x")})
			return err
		},
	}
	for name, f := range refused {
		assert.Error(t, f(), name)
		assert.Equal(t, used, len(s.data.block), "%s wrote into the data block", name)
		assert.Equal(t, n, s.log.n, name)
	}
	res, err := s.Append(ctx, "a", eventstore.NoStream, ev) // idempotent repeat
	require.NoError(t, err)
	assert.True(t, res.Duplicate)
	assert.Equal(t, used, len(s.data.block), "a repeat wrote into the data block")
	require.NoError(t, s.Close())
	_, err = s.Append(ctx, "b", eventstore.Any, eventstore.EventData{Type: "t", Data: []byte("x")})
	assert.ErrorIs(t, err, eventstore.ErrClosed)
	assert.Equal(t, used, len(s.data.block), "a closed store wrote into the data block")
}

func TestReviewS5_EmptyAndNilPayloadsStayNonNil(t *testing.T) {
	ctx := context.Background()
	s := New()
	for i := range 600 { // fill blocks exactly to their ends, with empty payloads between
		data := make([]byte, i%7)
		_, err := s.Append(ctx, "e", eventstore.Any, eventstore.EventData{Type: "t", Data: data}, eventstore.EventData{Type: "t", Data: []byte{}})
		require.NoError(t, err)
	}
	for ev, err := range s.ReadStream(ctx, "e", eventstore.Forward(0)) {
		require.NoError(t, err)
		require.NotNil(t, ev.Data, "event %d", ev.Version)
	}
	for i := 0; i < s.log.n; i++ {
		e := s.log.at(i)
		require.NotNil(t, e.Data, "stored %d", i)
		require.Equal(t, len(e.Data), cap(e.Data), "stored %d is capped", i)
	}
}
