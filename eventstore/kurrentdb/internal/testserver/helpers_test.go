package testserver

import (
	"context"
	"errors"
	"io"
	"regexp"
	"testing"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// quiet starts a server without $stats noise, for tests that count $all.
func quiet(t *testing.T) *Server {
	t.Helper()
	srv, err := Start(Options{StatsEvery: -1})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	return srv
}

// connect returns a real client of srv, closed when the test ends (before
// the server: cleanups run last first).
func connect(t *testing.T, srv *Server) *esdb.Client {
	t.Helper()
	cfg, err := esdb.ParseConnectionString(srv.URL())
	require.NoError(t, err)
	cfg.Logger = esdb.NoopLogging()
	c, err := esdb.NewClient(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func event(typ, data string) esdb.EventData {
	return esdb.EventData{EventID: uuid.New(), EventType: typ, ContentType: esdb.ContentTypeJson, Data: []byte(data)}
}

func events(n int) []esdb.EventData {
	evs := make([]esdb.EventData, n)
	for i := range evs {
		evs[i] = event("counted", `{"n":1}`)
	}
	return evs
}

func appendOK(t *testing.T, c *esdb.Client, stream string, exp esdb.ExpectedRevision, evs ...esdb.EventData) *esdb.WriteResult {
	t.Helper()
	res, err := c.AppendToStream(ctxT(t), stream, esdb.AppendToStreamOptions{ExpectedRevision: exp}, evs...)
	require.NoError(t, err)
	return res
}

// drain reads a count read to its end.
func drain(rs *esdb.ReadStream) ([]*esdb.RecordedEvent, error) {
	defer rs.Close()
	var out []*esdb.RecordedEvent
	for {
		e, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, e.OriginalEvent())
	}
}

func readStream(t *testing.T, c *esdb.Client, stream string, opts esdb.ReadStreamOptions, count uint64) ([]*esdb.RecordedEvent, error) {
	t.Helper()
	rs, err := c.ReadStream(ctxT(t), stream, opts, count)
	require.NoError(t, err, "the client reports read errors on Recv, not on open")
	return drain(rs)
}

func readAll(t *testing.T, c *esdb.Client, opts esdb.ReadAllOptions, count uint64) []*esdb.RecordedEvent {
	t.Helper()
	rs, err := c.ReadAll(ctxT(t), opts, count)
	require.NoError(t, err)
	evs, err := drain(rs)
	require.NoError(t, err)
	return evs
}

func numbers(evs []*esdb.RecordedEvent) []uint64 {
	out := make([]uint64, len(evs))
	for i, e := range evs {
		out[i] = e.EventNumber
	}
	return out
}

func code(t *testing.T, err error) esdb.ErrorCode {
	t.Helper()
	var e *esdb.Error
	require.ErrorAs(t, err, &e)
	return e.Code()
}

var wrongVersionText = regexp.MustCompile(`^wrong expected version: expecting '([^']*)' but got '([^']*)'$`)

// wrongVersion parses the client's wrong-version error the way the adapter
// must: from the text of the *esdb.Error.
func wrongVersion(t *testing.T, err error) (expected, current string) {
	t.Helper()
	var e *esdb.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, esdb.ErrorCodeWrongExpectedVersion, e.Code())
	m := wrongVersionText.FindStringSubmatch(e.Err().Error())
	require.NotNil(t, m, "text %q", e.Err().Error())
	return m[1], m[2]
}

// next waits for the subscription's next message with a timeout, so that a
// missing message fails the test instead of hanging it.
func next(t *testing.T, sub *esdb.Subscription) *esdb.SubscriptionEvent {
	t.Helper()
	ch := make(chan *esdb.SubscriptionEvent, 1)
	go func() { ch <- sub.Recv() }()
	select {
	case e := <-ch:
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("no subscription message within 5s")
		return nil
	}
}

// nextEvent skips checkpoints and caught-up messages.
func nextEvent(t *testing.T, sub *esdb.Subscription) *esdb.RecordedEvent {
	t.Helper()
	for {
		e := next(t, sub)
		require.Nil(t, e.SubscriptionDropped, "dropped: %v", e.SubscriptionDropped)
		if e.EventAppeared != nil {
			return e.EventAppeared.OriginalEvent()
		}
	}
}

// untilCaughtUp collects events up to the CaughtUp message.
func untilCaughtUp(t *testing.T, sub *esdb.Subscription) []*esdb.RecordedEvent {
	t.Helper()
	var out []*esdb.RecordedEvent
	for {
		e := next(t, sub)
		require.Nil(t, e.SubscriptionDropped, "dropped: %v", e.SubscriptionDropped)
		switch {
		case e.CaughtUp != nil:
			return out
		case e.EventAppeared != nil:
			out = append(out, e.EventAppeared.OriginalEvent())
		}
	}
}

func pos(e *esdb.RecordedEvent) position {
	return position{commit: e.Position.Commit, prepare: e.Position.Prepare}
}
