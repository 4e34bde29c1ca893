package kurrentdb

import (
	"context"
	"errors"
	"testing"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/kurrentdb/internal/testserver"
)

// The actual version of a refused append comes from the client's error
// text when it says one, and from the stream when the text says "0",
// which the client also says when the server sent no version.
func TestActualVersionFromTheTextOrTheStream(t *testing.T) {
	srv := testserver.New(t)
	s, err := Open(context.Background(), srv.URL(), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	for range 6 {
		_, err := s.Append(ctx, "s", eventstore.Any, eventstore.EventData{Type: "x", Data: []byte(`{}`)})
		require.NoError(t, err)
	}
	text := func(got string) error {
		return errors.New("[ErrorCodeWrongExpectedVersion] an append request failed the optimistic concurrency on the server: wrong expected version: expecting '9' but got '" + got + "'")
	}
	for _, c := range []struct {
		stream, got string
		want        eventstore.ExpectedVersion
	}{
		{"elsewhere", "7", eventstore.Exact(7)},         // the text, not the stream, which does not exist
		{"elsewhere", "no_stream", eventstore.NoStream}, // the text
		{"s", "0", eventstore.Exact(5)},                 // ambiguous: the stream says 5
		{"elsewhere", "0", eventstore.NoStream},         // ambiguous: the stream does not exist
		{"s", "garbled", eventstore.Exact(5)},           // unreadable: the stream
	} {
		got, err := s.actualVersion(ctx, c.stream, text(c.got))
		require.NoError(t, err)
		assert.Equal(t, c.want, got, "%s, text says %q", c.stream, c.got)
	}
}

// A compaction that comes late never lowers the truncation of a later one,
// and keeps the stream's other metadata.
func TestTruncationOnlyRises(t *testing.T) {
	srv := testserver.New(t)
	s, err := Open(context.Background(), srv.URL(), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	stream := stateStream(deadLetterKind, "late")
	require.NoError(t, s.limitStream(ctx, stream, 99))
	require.NoError(t, s.truncateBefore(ctx, stream, 10))
	require.NoError(t, s.truncateBefore(ctx, stream, 5))
	last, err := s.lastRecord(ctx, "$$"+stream)
	require.NoError(t, err)
	meta, err := esdb.StreamMetadataFromJson(last.Data)
	require.NoError(t, err)
	require.NotNil(t, meta.TruncateBefore())
	assert.Equal(t, uint64(10), *meta.TruncateBefore())
	require.NotNil(t, meta.MaxCount())
	assert.Equal(t, uint64(99), *meta.MaxCount())
}
