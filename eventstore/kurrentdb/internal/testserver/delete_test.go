package testserver

import (
	"math"
	"testing"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// lastInAll is the newest event of $all.
func lastInAll(t *testing.T, c *esdb.Client) *esdb.RecordedEvent {
	t.Helper()
	evs := readAll(t, c, esdb.ReadAllOptions{Direction: esdb.Backwards, From: esdb.End{}}, 1)
	require.Len(t, evs, 1)
	return evs[0]
}

func TestSoftDeleteHidesTheStreamAndAnAppendRecreatesIt(t *testing.T) {
	c := connect(t, quiet(t))
	ctx := ctxT(t)
	appendOK(t, c, "s", esdb.NoStream{}, events(3)...)

	del, err := c.DeleteStream(ctx, "s", esdb.DeleteStreamOptions{ExpectedRevision: esdb.Revision(2)})
	require.NoError(t, err)
	marker := lastInAll(t, c)
	require.Equal(t, "$$s", marker.StreamID)
	require.Equal(t, "$metadata", marker.EventType)
	require.JSONEq(t, `{"$tb":9223372036854775807}`, string(marker.Data))
	require.Equal(t, marker.Position, del.Position)

	_, err = readStream(t, c, "s", esdb.ReadStreamOptions{}, 10)
	require.Equal(t, esdb.ErrorCodeResourceNotFound, code(t, err))

	// StreamExists counts a soft-deleted stream as deleted.
	_, err = c.AppendToStream(ctx, "s", esdb.AppendToStreamOptions{ExpectedRevision: esdb.StreamExists{}}, event("t", `{}`))
	require.Equal(t, esdb.ErrorCodeStreamDeleted, code(t, err))

	// NoStream recreates it; the numbering goes on, the old events stay hidden.
	res := appendOK(t, c, "s", esdb.NoStream{}, events(1)...)
	require.Equal(t, uint64(3), res.NextExpectedVersion)
	got, err := readStream(t, c, "s", esdb.ReadStreamOptions{}, 10)
	require.NoError(t, err)
	require.Equal(t, []uint64{3}, numbers(got))
	undelete := lastInAll(t, c)
	require.Equal(t, "$$s", undelete.StreamID)
	require.JSONEq(t, `{"$tb":3}`, string(undelete.Data), "the server moves $tb to the first new event")
}

func TestSoftDeletedStreamAcceptsAnyAndItsLastRevision(t *testing.T) {
	c := connect(t, quiet(t))
	ctx := ctxT(t)
	appendOK(t, c, "a", esdb.NoStream{}, events(2)...)
	appendOK(t, c, "b", esdb.NoStream{}, events(2)...)
	for _, s := range []string{"a", "b"} {
		_, err := c.DeleteStream(ctx, s, esdb.DeleteStreamOptions{})
		require.NoError(t, err)
	}
	require.Equal(t, uint64(2), appendOK(t, c, "a", esdb.Any{}, events(1)...).NextExpectedVersion)
	require.Equal(t, uint64(2), appendOK(t, c, "b", esdb.Revision(1), events(1)...).NextExpectedVersion)
}

func TestDeleteWrongVersionIsFailedPreconditionWithTheServersText(t *testing.T) {
	c := connect(t, quiet(t))
	ctx := ctxT(t)
	appendOK(t, c, "s", esdb.NoStream{}, events(3)...)

	_, err := c.DeleteStream(ctx, "s", esdb.DeleteStreamOptions{ExpectedRevision: esdb.Revision(5)})
	require.Equal(t, esdb.ErrorCodeUnknown, code(t, err), "the client maps FailedPrecondition to Unknown")
	var e *esdb.Error
	require.ErrorAs(t, err, &e)
	st := status.Convert(e.Err())
	require.Equal(t, codes.FailedPrecondition, st.Code())
	require.Equal(t, "Delete failed due to WrongExpectedVersion. Stream: s, Expected version: 5, Actual version: 2", st.Message())

	// Deleting a stream that never existed is a wrong version even with Any.
	_, err = c.DeleteStream(ctx, "never", esdb.DeleteStreamOptions{})
	require.ErrorAs(t, err, &e)
	require.Equal(t, "Delete failed due to WrongExpectedVersion. Stream: never, Expected version: -2, Actual version: -1", status.Convert(e.Err()).Message())

	_, err = c.TombstoneStream(ctx, "s", esdb.TombstoneStreamOptions{ExpectedRevision: esdb.NoStream{}})
	require.ErrorAs(t, err, &e)
	require.Equal(t, "Delete failed due to WrongExpectedVersion. Stream: s, Expected version: -1, Actual version: 2", status.Convert(e.Err()).Message())
}

func TestTombstoneDeletesForGood(t *testing.T) {
	c := connect(t, quiet(t))
	ctx := ctxT(t)
	appendOK(t, c, "s", esdb.NoStream{}, events(2)...)

	res, err := c.TombstoneStream(ctx, "s", esdb.TombstoneStreamOptions{ExpectedRevision: esdb.Revision(1)})
	require.NoError(t, err)
	tomb := lastInAll(t, c)
	require.Equal(t, "s", tomb.StreamID, "the tombstone is written into the user stream")
	require.Equal(t, "$streamDeleted", tomb.EventType)
	require.Equal(t, uint64(math.MaxInt64), tomb.EventNumber)
	require.Equal(t, res.Position, tomb.Position)

	_, err = readStream(t, c, "s", esdb.ReadStreamOptions{}, 10)
	require.Equal(t, esdb.ErrorCodeStreamDeleted, code(t, err))
	require.ErrorContains(t, err, "stream 's' is deleted")
	for _, exp := range []esdb.ExpectedRevision{esdb.Any{}, esdb.NoStream{}, esdb.StreamExists{}, esdb.Revision(1)} {
		_, err = c.AppendToStream(ctx, "s", esdb.AppendToStreamOptions{ExpectedRevision: exp}, event("t", `{}`))
		require.Equal(t, esdb.ErrorCodeStreamDeleted, code(t, err))
	}
	_, err = c.DeleteStream(ctx, "s", esdb.DeleteStreamOptions{})
	require.Equal(t, esdb.ErrorCodeStreamDeleted, code(t, err))
	_, err = c.TombstoneStream(ctx, "s", esdb.TombstoneStreamOptions{})
	require.Equal(t, esdb.ErrorCodeStreamDeleted, code(t, err))

	sub, err := c.SubscribeToStream(ctx, "s", esdb.SubscribeToStreamOptions{From: esdb.Start{}})
	require.NoError(t, err, "the server confirms, then fails the catch-up")
	defer sub.Close()
	drop := next(t, sub).SubscriptionDropped
	require.NotNil(t, drop)
	require.Equal(t, codes.FailedPrecondition, status.Code(drop.Error), "a subscription drop carries the raw gRPC error")
}
