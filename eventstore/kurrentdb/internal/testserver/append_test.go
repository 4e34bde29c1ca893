package testserver

import (
	"testing"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestAppendThenReadRoundTrip(t *testing.T) {
	at := time.Date(2026, 12, 5, 10, 11, 12, 123456789, time.UTC)
	srv, err := Start(Options{StatsEvery: -1, Now: func() time.Time { return at }})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	c := connect(t, srv)

	sent := []esdb.EventData{
		{EventID: uuid.New(), EventType: "order.placed", ContentType: esdb.ContentTypeJson, Data: []byte(`{"a":1}`), Metadata: []byte(`{"m":1}`)},
		{EventID: uuid.New(), EventType: "order.paid", ContentType: esdb.ContentTypeBinary, Data: []byte{0, 1, 2}},
		{EventID: uuid.New(), EventType: "order.shipped", ContentType: esdb.ContentTypeJson, Data: []byte(`{}`)},
	}
	res := appendOK(t, c, "order-1é", esdb.NoStream{}, sent...)
	require.Equal(t, uint64(2), res.NextExpectedVersion, "the client's NextExpectedVersion is the last written revision")

	got, err := readStream(t, c, "order-1é", esdb.ReadStreamOptions{}, 10)
	require.NoError(t, err)
	require.Len(t, got, 3)
	for i, e := range got {
		require.Equal(t, sent[i].EventID, e.EventID)
		require.Equal(t, sent[i].EventType, e.EventType)
		require.Equal(t, sent[i].Data, e.Data)
		require.Equal(t, "order-1é", e.StreamID)
		require.Equal(t, uint64(i), e.EventNumber)
		require.Equal(t, at.Truncate(100*time.Nanosecond), e.CreatedDate, "created is in 100 ns ticks")
	}
	require.Equal(t, []byte(`{"m":1}`), got[0].UserMetadata)
	require.Empty(t, got[1].UserMetadata)
	require.Equal(t, "application/json", got[0].ContentType)
	require.Equal(t, "application/octet-stream", got[1].ContentType)

	// One append, one commit: the events share it, their prepares grow, with
	// gaps like byte offsets. The write result names the last event.
	for i := 1; i < 3; i++ {
		require.Equal(t, got[0].Position.Commit, got[i].Position.Commit)
		require.Greater(t, got[i].Position.Prepare, got[i-1].Position.Prepare+1)
		require.Less(t, got[i].Position.Prepare, got[i].Position.Commit)
	}
	require.Equal(t, got[2].Position, esdb.Position{Commit: res.CommitPosition, Prepare: res.PreparePosition})

	// A single event is written as a modern server writes it: commit ==
	// prepare, after the previous commit.
	one := appendOK(t, c, "order-1é", esdb.Revision(2), event("order.closed", `{}`))
	require.Equal(t, one.CommitPosition, one.PreparePosition)
	require.Greater(t, one.CommitPosition, res.CommitPosition)
}

func TestExpectedRevisionChecks(t *testing.T) {
	c := connect(t, quiet(t))
	ctx := ctxT(t)
	appendTo := func(stream string, exp esdb.ExpectedRevision, evs ...esdb.EventData) (*esdb.WriteResult, error) {
		return c.AppendToStream(ctx, stream, esdb.AppendToStreamOptions{ExpectedRevision: exp}, evs...)
	}

	_, err := appendTo("s", esdb.StreamExists{}, event("t", `{}`))
	exp, cur := wrongVersion(t, err)
	require.Equal(t, [2]string{"stream_exists", "no_stream"}, [2]string{exp, cur})

	_, err = appendTo("s", esdb.Revision(0), event("t", `{}`))
	exp, cur = wrongVersion(t, err)
	require.Equal(t, [2]string{"0", "no_stream"}, [2]string{exp, cur})

	res, err := appendTo("s", esdb.NoStream{}, events(2)...)
	require.NoError(t, err)
	require.Equal(t, uint64(1), res.NextExpectedVersion)

	_, err = appendTo("s", esdb.NoStream{}, event("t", `{}`))
	exp, cur = wrongVersion(t, err)
	require.Equal(t, [2]string{"no_stream", "1"}, [2]string{exp, cur})

	_, err = appendTo("s", esdb.Revision(5), event("t", `{}`))
	exp, cur = wrongVersion(t, err)
	require.Equal(t, [2]string{"5", "1"}, [2]string{exp, cur})

	_, err = appendTo("s", esdb.Revision(0), event("t", `{}`))
	exp, cur = wrongVersion(t, err)
	require.Equal(t, [2]string{"0", "1"}, [2]string{exp, cur})

	res, err = appendTo("s", esdb.Revision(1), event("t", `{}`))
	require.NoError(t, err)
	require.Equal(t, uint64(2), res.NextExpectedVersion)

	res, err = appendTo("s", esdb.StreamExists{}, event("t", `{}`))
	require.NoError(t, err)
	require.Equal(t, uint64(3), res.NextExpectedVersion)

	res, err = appendTo("s", esdb.Any{}, event("t", `{}`))
	require.NoError(t, err)
	require.Equal(t, uint64(4), res.NextExpectedVersion)

	res, err = appendTo("fresh", esdb.Any{}, event("t", `{}`))
	require.NoError(t, err)
	require.Equal(t, uint64(0), res.NextExpectedVersion)
}

func TestIdempotentAppends(t *testing.T) {
	c := connect(t, quiet(t))
	ctx := ctxT(t)
	appendTo := func(exp esdb.ExpectedRevision, evs ...esdb.EventData) (*esdb.WriteResult, error) {
		return c.AppendToStream(ctx, "idem", esdb.AppendToStreamOptions{ExpectedRevision: exp}, evs...)
	}
	e := events(6)
	first, err := appendTo(esdb.NoStream{}, e[0], e[1])
	require.NoError(t, err)
	second, err := appendTo(esdb.Revision(1), e[2])
	require.NoError(t, err)
	_, err = appendTo(esdb.Revision(2), e[3])
	require.NoError(t, err)

	t.Run("exact repeat after later appends answers the original result", func(t *testing.T) {
		again, err := appendTo(esdb.NoStream{}, e[0], e[1])
		require.NoError(t, err)
		require.Equal(t, first, again, "a repeat cannot be told from the original")
		again, err = appendTo(esdb.Revision(1), e[2])
		require.NoError(t, err)
		require.Equal(t, second, again)
	})
	t.Run("exact with other IDs at v+1 is a wrong version", func(t *testing.T) {
		_, err := appendTo(esdb.Revision(1), e[4])
		exp, cur := wrongVersion(t, err)
		require.Equal(t, [2]string{"1", "3"}, [2]string{exp, cur})
	})
	t.Run("exact repeat then a new ID is a wrong version", func(t *testing.T) {
		_, err := appendTo(esdb.Revision(1), e[2], e[4])
		wrongVersion(t, err)
		_, err = appendTo(esdb.Revision(2), e[3], e[4]) // more than exists beyond v
		wrongVersion(t, err)
	})
	t.Run("any repeats wherever the IDs are in this stream", func(t *testing.T) {
		again, err := appendTo(esdb.Any{}, e[0], e[1])
		require.NoError(t, err)
		require.Equal(t, first, again)
		again, err = appendTo(esdb.StreamExists{}, e[2])
		require.NoError(t, err)
		require.Equal(t, second, again)
		// The server does not check the order; the reply names the last ID's number.
		again, err = appendTo(esdb.Any{}, e[1], e[0])
		require.NoError(t, err)
		require.Equal(t, uint64(0), again.NextExpectedVersion)
	})
	t.Run("any with a known then an unknown ID is a wrong version", func(t *testing.T) {
		_, err := appendTo(esdb.Any{}, e[0], e[4])
		exp, cur := wrongVersion(t, err)
		require.Equal(t, [2]string{"any", "3"}, [2]string{exp, cur})
	})
	t.Run("IDs stored in another stream do not repeat", func(t *testing.T) {
		res, err := c.AppendToStream(ctx, "other", esdb.AppendToStreamOptions{}, e[0])
		require.NoError(t, err)
		require.Equal(t, uint64(0), res.NextExpectedVersion)
	})
	t.Run("at the current revision the server writes without an ID check", func(t *testing.T) {
		res, err := appendTo(esdb.Revision(3), e[3])
		require.NoError(t, err)
		require.Equal(t, uint64(4), res.NextExpectedVersion)
	})

	got, err := readStream(t, c, "idem", esdb.ReadStreamOptions{}, 100)
	require.NoError(t, err)
	ids := make([]uuid.UUID, len(got))
	for i, g := range got {
		ids[i] = g.EventID
	}
	require.Equal(t, []uuid.UUID{e[0].EventID, e[1].EventID, e[2].EventID, e[3].EventID, e[3].EventID}, ids)
}
