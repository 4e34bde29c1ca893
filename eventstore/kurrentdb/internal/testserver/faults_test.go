package testserver

import (
	"io"
	"testing"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestDropSubscriptionsEndsThemWithUnavailable(t *testing.T) {
	srv := quiet(t)
	c := connect(t, srv)
	a := subscribeAll(t, c, esdb.SubscribeToAllOptions{From: esdb.Start{}})
	s, err := c.SubscribeToStream(ctxT(t), "s", esdb.SubscribeToStreamOptions{From: esdb.Start{}})
	require.NoError(t, err)
	defer s.Close()
	untilCaughtUp(t, a)
	untilCaughtUp(t, s)

	srv.DropSubscriptions()
	for _, sub := range []*esdb.Subscription{a, s} {
		drop := next(t, sub).SubscriptionDropped
		require.NotNil(t, drop)
		require.Equal(t, codes.Unavailable, status.Code(drop.Error))
	}

	// Later subscriptions are not affected.
	again := subscribeAll(t, c, esdb.SubscribeToAllOptions{From: esdb.Start{}})
	appendOK(t, c, "s", esdb.NoStream{}, events(1)...)
	require.Equal(t, "s", nextEvent(t, again).StreamID)
}

func TestFailNextFailsThatManyCallsOfTheKind(t *testing.T) {
	srv := quiet(t)
	c := connect(t, srv)
	ctx := ctxT(t)

	srv.FailNext(Append, 2, codes.Unavailable)
	for range 2 {
		_, err := c.AppendToStream(ctx, "s", esdb.AppendToStreamOptions{}, event("t", `{}`))
		require.Equal(t, esdb.ErrorUnavailable, code(t, err))
	}
	_, err := readStream(t, c, "s", esdb.ReadStreamOptions{}, 1)
	require.Equal(t, esdb.ErrorCodeResourceNotFound, code(t, err), "a failed append has no effect")
	appendOK(t, c, "s", esdb.NoStream{}, events(1)...)

	srv.FailNext(Read, 1, codes.PermissionDenied)
	_, err = readStream(t, c, "s", esdb.ReadStreamOptions{}, 1)
	require.Equal(t, esdb.ErrorCodeAccessDenied, code(t, err))
	_, err = readStream(t, c, "s", esdb.ReadStreamOptions{}, 1)
	require.NoError(t, err)

	srv.FailNext(Subscribe, 1, codes.Aborted)
	_, err = c.SubscribeToAll(ctx, esdb.SubscribeToAllOptions{})
	require.Equal(t, esdb.ErrorAborted, code(t, err))

	srv.FailNext(Delete, 1, codes.Unavailable)
	_, err = c.DeleteStream(ctx, "s", esdb.DeleteStreamOptions{})
	require.Equal(t, esdb.ErrorUnavailable, code(t, err))

	srv.FailNext(Tombstone, 1, codes.DeadlineExceeded)
	_, err = c.TombstoneStream(ctx, "s", esdb.TombstoneStreamOptions{})
	require.Equal(t, esdb.ErrorCodeDeadlineExceeded, code(t, err))

	got, err := readStream(t, c, "s", esdb.ReadStreamOptions{}, 10)
	require.NoError(t, err, "neither the delete nor the tombstone happened")
	require.Len(t, got, 1)
}

func TestDelayNextLetsTheClientDeadlineFire(t *testing.T) {
	srv := quiet(t)
	c := connect(t, srv)
	short := 100 * time.Millisecond

	srv.DelayNext(Append, 1, time.Minute)
	begin := time.Now()
	_, err := c.AppendToStream(ctxT(t), "s", esdb.AppendToStreamOptions{Deadline: &short}, event("t", `{}`))
	require.Equal(t, esdb.ErrorCodeDeadlineExceeded, code(t, err))
	require.Less(t, time.Since(begin), 5*time.Second)
	_, err = readStream(t, c, "s", esdb.ReadStreamOptions{}, 1)
	require.Equal(t, esdb.ErrorCodeResourceNotFound, code(t, err), "the abandoned append wrote nothing")

	// A delay shorter than the deadline only slows the call.
	srv.DelayNext(Append, 1, 50*time.Millisecond)
	begin = time.Now()
	appendOK(t, c, "s", esdb.NoStream{}, events(1)...)
	require.GreaterOrEqual(t, time.Since(begin), 50*time.Millisecond)

	srv.DelayNext(Read, 1, time.Minute)
	rs, err := c.ReadStream(ctxT(t), "s", esdb.ReadStreamOptions{Deadline: &short}, 1)
	require.NoError(t, err)
	_, err = drain(rs)
	require.Equal(t, esdb.ErrorCodeDeadlineExceeded, code(t, err))
}

func TestConnectionLostAfterCommitThenAnIdempotentRetry(t *testing.T) {
	srv := quiet(t)
	c := connect(t, srv)
	ctx := ctxT(t)
	evs := events(2)

	srv.DisconnectNextAppend(AfterCommit)
	_, err := c.AppendToStream(ctx, "s", esdb.AppendToStreamOptions{ExpectedRevision: esdb.NoStream{}}, evs...)
	require.Equal(t, esdb.ErrorUnavailable, code(t, err))

	// The client reconnects on its next call; the retry finds its own write.
	res, err := c.AppendToStream(ctx, "s", esdb.AppendToStreamOptions{ExpectedRevision: esdb.NoStream{}}, evs...)
	require.NoError(t, err)
	require.Equal(t, uint64(1), res.NextExpectedVersion)
	got, err := readStream(t, c, "s", esdb.ReadStreamOptions{}, 10)
	require.NoError(t, err)
	require.Len(t, got, 2, "stored once")
	require.Equal(t, got[1].Position, esdb.Position{Commit: res.CommitPosition, Prepare: res.PreparePosition})
}

func TestConnectionLostBeforeCommitStoresNothing(t *testing.T) {
	srv := quiet(t)
	c := connect(t, srv)
	ctx := ctxT(t)

	srv.DisconnectNextAppend(BeforeCommit)
	_, err := c.AppendToStream(ctx, "s", esdb.AppendToStreamOptions{ExpectedRevision: esdb.NoStream{}}, events(1)...)
	require.Equal(t, esdb.ErrorUnavailable, code(t, err))
	_, err = readStream(t, c, "s", esdb.ReadStreamOptions{}, 1)
	require.Equal(t, esdb.ErrorCodeResourceNotFound, code(t, err))
	appendOK(t, c, "s", esdb.NoStream{}, events(1)...)
}

func TestRestartKeepsTheLogAndTheAddress(t *testing.T) {
	srv := quiet(t)
	c := connect(t, srv)
	appendOK(t, c, "s", esdb.NoStream{}, events(2)...)
	sub := subscribeAll(t, c, esdb.SubscribeToAllOptions{From: esdb.Start{}})
	untilCaughtUp(t, sub)
	url := srv.URL()

	require.NoError(t, srv.Restart())
	require.Equal(t, url, srv.URL())
	drop := next(t, sub).SubscriptionDropped
	require.NotNil(t, drop, "a restart ends open calls")
	require.Equal(t, codes.Unavailable, status.Code(drop.Error))

	got, err := readStream(t, c, "s", esdb.ReadStreamOptions{}, 10)
	require.NoError(t, err, "the client reconnects on its next call")
	require.Len(t, got, 2)
	appendOK(t, c, "s", esdb.Revision(1), events(1)...)
}

// Without a dropped subscription to tell it, the client finds out about the
// restart on its next call, which may fail; the one after succeeds.
func TestRestartIsNoticedByTheNextCall(t *testing.T) {
	srv := quiet(t)
	c := connect(t, srv)
	appendOK(t, c, "s", esdb.Any{}, events(1)...)
	for range 10 {
		require.NoError(t, srv.Restart())
		_, err := c.AppendToStream(ctxT(t), "s", esdb.AppendToStreamOptions{}, events(1)...)
		if err != nil {
			var e *esdb.Error
			require.ErrorAs(t, err, &e)
			if e.Code() != esdb.ErrorUnavailable {
				require.Equal(t, esdb.ErrorCodeUnknown, e.Code())
				require.ErrorIs(t, err, io.EOF, "the client's Send saw the closed connection")
			}
		}
		appendOK(t, c, "s", esdb.Any{}, events(1)...)
	}
}

func TestForgottenIDsMakeAnyRepeatsWriteAgain(t *testing.T) {
	srv := quiet(t)
	c := connect(t, srv)
	e := events(1)
	appendOK(t, c, "s", esdb.Any{}, e...)
	require.Equal(t, uint64(0), appendOK(t, c, "s", esdb.Any{}, e...).NextExpectedVersion, "remembered: a repeat")

	srv.ForgetEventIDs()
	require.Equal(t, uint64(0), appendOK(t, c, "s", esdb.NoStream{}, e...).NextExpectedVersion,
		"an exact repeat is checked against the stored events")
	require.Equal(t, uint64(1), appendOK(t, c, "s", esdb.Any{}, e...).NextExpectedVersion,
		"forgotten: Any writes the same event again")

	require.NoError(t, srv.Restart())
	_, _ = c.AppendToStream(ctxT(t), "elsewhere", esdb.AppendToStreamOptions{}, events(1)...) // notice the restart
	require.Equal(t, uint64(2), appendOK(t, c, "s", esdb.StreamExists{}, e...).NextExpectedVersion,
		"a restarted node has forgotten too")
}

func TestCloseTwiceAndRestartAfterClose(t *testing.T) {
	srv, err := Start(Options{})
	require.NoError(t, err)
	srv.Close()
	srv.Close()
	require.Error(t, srv.Restart())
}
