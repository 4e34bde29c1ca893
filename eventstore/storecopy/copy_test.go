package storecopy_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/eventstore/storecopy"
	"github.com/cairn-es/cairn/internal/trusted"
)

// writeLog fills s with a varied log: several streams interleaved,
// multi-event appends, a unicode stream name, metadata with extra keys,
// events at schema version 2 and with empty data, and the records only
// Cairn writes (a saga stream, a "cairn." type and metadata key).
func writeLog(t testing.TB, s eventstore.Store, rounds int) {
	t.Helper()
	ctx := context.Background()
	own := trusted.Writer(ctx)
	streams := []string{"order-1", "order-2", "client-ü日本-7", "ledger"}
	for r := range rounds {
		for i, stream := range streams {
			n := 1 + (r+i)%3
			evs := make([]eventstore.EventData, n)
			for j := range evs {
				evs[j] = eventstore.EventData{
					Type: fmt.Sprintf("%s.event%d", stream[:5], j), SchemaVersion: uint32(1 + (r+j)%2),
					Data: fmt.Appendf(nil, `{"round":%d,"i":%d}`, r, j),
					Metadata: eventstore.Metadata{CorrelationID: fmt.Sprint("corr-", r), CausationID: "cause",
						CommandID: fmt.Sprintf("cmd-%d-%d", r, i), Extra: map[string]string{"tenant": "acme", "zeichen": "ß→✓"}},
				}
			}
			if r%4 == 3 {
				evs[0].Data = []byte{}
				evs[0].Metadata = eventstore.Metadata{}
			}
			_, err := s.Append(ctx, stream, eventstore.Any, evs...)
			require.NoError(t, err)
		}
		_, err := s.Append(own, "saga:shipping-1", eventstore.Any, eventstore.EventData{
			Type: "cairn.saga.step", SchemaVersion: 2, Data: fmt.Appendf(nil, `{"step":%d}`, r),
			Metadata: eventstore.Metadata{Extra: map[string]string{"cairn.command_type": "ship", "other": "x"}},
		})
		require.NoError(t, err)
	}
	_, err := s.Append(own, "order-1", eventstore.Any, eventstore.EventData{
		Type: "cairn.rejected", Data: []byte(`{"reason":"no"}`),
		Metadata: eventstore.Metadata{CommandID: "cmd-rejected", Extra: map[string]string{"cairn.command_type": "PlaceOrder"}},
	})
	require.NoError(t, err)
}

// readAll returns every event of s in global order.
func readAll(t testing.TB, s eventstore.Store) []eventstore.Event {
	t.Helper()
	var out []eventstore.Event
	for e, err := range s.ReadAll(context.Background(), eventstore.Start, eventstore.Filter{}) {
		require.NoError(t, err)
		out = append(out, e)
	}
	return out
}

// requireSameEvents checks that got holds want's events, field by field,
// in the same order, each once; positions and recording times are each
// store's own.
func requireSameEvents(t testing.TB, want, got []eventstore.Event) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		w, g := want[i], got[i]
		require.Equal(t, w.ID, g.ID, "event %d", i)
		require.Equal(t, w.StreamID, g.StreamID, "event %d", i)
		require.Equal(t, w.Version, g.Version, "event %d", i)
		require.Equal(t, w.Type, g.Type, "event %d", i)
		require.Equal(t, w.SchemaVersion, g.SchemaVersion, "event %d", i)
		require.Equal(t, string(w.Data), string(g.Data), "event %d", i)
		require.NotNil(t, g.Data, "event %d", i)
		require.Equal(t, w.Metadata.CorrelationID, g.Metadata.CorrelationID, "event %d", i)
		require.Equal(t, w.Metadata.CausationID, g.Metadata.CausationID, "event %d", i)
		require.Equal(t, w.Metadata.CommandID, g.Metadata.CommandID, "event %d", i)
		require.Equal(t, len(w.Metadata.Extra), len(g.Metadata.Extra), "event %d", i)
		for k, v := range w.Metadata.Extra {
			require.Equal(t, v, g.Metadata.Extra[k], "event %d key %q", i, k)
		}
	}
}

func openSQLite(t testing.TB, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{Synchronous: sqlite.SyncNormal})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestRoundTripThroughEveryStore(t *testing.T) {
	ctx := context.Background()
	src := memory.New()
	t.Cleanup(func() { _ = src.Close() })
	writeLog(t, src, 12)
	want := readAll(t, src)

	stores := []eventstore.Store{src, openSQLite(t, filepath.Join(t.TempDir(), "copy.db")), newPostgres(t), memory.New()}
	for i := 1; i < len(stores); i++ {
		from, to := stores[i-1], stores[i]
		r, err := storecopy.Copy(ctx, from, to, storecopy.Options{})
		require.NoError(t, err, "copy %T -> %T", from, to)
		assert.Equal(t, int64(len(want)), r.Copied, "%T -> %T", from, to)
		assert.Zero(t, r.Duplicates)
		assert.Contains(t, r.Checkpoint, storecopy.CheckpointPrefix)
		require.NotNil(t, r.Verification)
		assert.Equal(t, 5, r.Verification.Streams)
		assert.Equal(t, int64(len(want)), r.Verification.Events)
		assert.Empty(t, r.Verification.Mismatches)
		requireSameEvents(t, want, readAll(t, to))
	}
}

// failingStore is a target whose append number failAt is written but
// answered with an error, as when a crash or lost connection comes
// between the commit and the reply.
type failingStore struct {
	*memory.Store
	calls, failAt atomic.Int64
}

var errLostReply = errors.New("reply lost")

func (s *failingStore) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	r, err := s.Store.Append(ctx, stream, expected, events...)
	if err == nil && s.calls.Add(1) == s.failAt.Load() {
		return eventstore.AppendResult{}, errLostReply
	}
	return r, err
}

func TestResumeAfterAnUnacknowledgedAppend(t *testing.T) {
	ctx := context.Background()
	src := memory.New()
	writeLog(t, src, 10)
	want := readAll(t, src)
	to := &failingStore{Store: memory.New()}
	to.failAt.Store(7)

	r, err := storecopy.Copy(ctx, src, to, storecopy.Options{})
	require.ErrorIs(t, err, errLostReply)
	require.Nil(t, r.Verification)
	held := len(readAll(t, to))
	require.Less(t, held, len(want))
	unacked := held - int(r.Copied)
	require.Positive(t, unacked, "the failed append was written")

	r2, err := storecopy.Copy(ctx, src, to, storecopy.Options{})
	require.NoError(t, err)
	assert.Equal(t, r.Checkpoint, r2.Checkpoint)
	assert.Equal(t, r.Last, r2.ResumedAfter)
	assert.Equal(t, int64(unacked), r2.Duplicates, "the unacknowledged append comes back as a duplicate")
	assert.Equal(t, int64(len(want)), r.Copied+r2.Copied+r2.Duplicates)
	assert.Empty(t, r2.Verification.Mismatches)
	requireSameEvents(t, want, readAll(t, to))
}

func TestResumeAfterCancelFromProgress(t *testing.T) {
	src := memory.New()
	writeLog(t, src, 40)
	want := readAll(t, src)
	to := memory.New()

	ctx, cancel := context.WithCancel(context.Background())
	var calls []storecopy.Progress
	r, err := storecopy.Copy(ctx, src, to, storecopy.Options{ProgressEvery: time.Nanosecond, Progress: func(p storecopy.Progress) {
		calls = append(calls, p)
		if p.Done >= int64(len(want)/2) {
			cancel()
		}
	}})
	require.ErrorIs(t, err, context.Canceled)
	require.NotEmpty(t, calls)
	last := calls[len(calls)-1]
	assert.True(t, last.Final)
	assert.Equal(t, int64(len(want)), last.Total)
	assert.Less(t, last.Done, last.Total)
	assert.Equal(t, last.Done, r.Copied)
	assert.Len(t, readAll(t, to), int(r.Copied), "whole appends only, each recorded")

	calls = nil
	r2, err := storecopy.Copy(context.Background(), src, to, storecopy.Options{ProgressEvery: time.Hour,
		Progress: func(p storecopy.Progress) { calls = append(calls, p) }})
	require.NoError(t, err)
	assert.Zero(t, r2.Duplicates)
	assert.Equal(t, int64(len(want)), r.Copied+r2.Copied)
	require.NotEmpty(t, calls)
	final := calls[len(calls)-1]
	assert.True(t, final.Final)
	assert.Equal(t, int64(len(want))-r.Copied, final.Total, "the rerun counts what is left")
	assert.Equal(t, final.Total, final.Done)
	assert.Zero(t, final.ETA)
	requireSameEvents(t, want, readAll(t, to))
}

// withoutCheckpoints hides the target's checkpoint store.
type withoutCheckpoints struct{ eventstore.Store }

func TestRerunWithoutCheckpointsCountsDuplicates(t *testing.T) {
	ctx := context.Background()
	src := memory.New()
	writeLog(t, src, 5)
	want := readAll(t, src)
	to := withoutCheckpoints{memory.New()}

	r, err := storecopy.Copy(ctx, src, to, storecopy.Options{})
	require.NoError(t, err)
	assert.Empty(t, r.Checkpoint)
	assert.Equal(t, int64(len(want)), r.Copied)
	r, err = storecopy.Copy(ctx, src, to, storecopy.Options{NoCount: true})
	require.NoError(t, err)
	assert.Zero(t, r.Copied)
	assert.Zero(t, r.Appends)
	assert.Equal(t, int64(len(want)), r.Duplicates)
	requireSameEvents(t, want, readAll(t, to))
}

func TestResumeAfterTheSourceStreamGrew(t *testing.T) {
	ctx := context.Background()
	src := memory.New()
	e := func(typ string) eventstore.EventData {
		return eventstore.EventData{ID: eventstore.NewEventID(), Type: typ, Data: []byte(`{}`)}
	}
	_, err := src.Append(ctx, "a", eventstore.NoStream, e("a0"), e("a1"))
	require.NoError(t, err)
	to := &failingStore{Store: memory.New()}
	to.failAt.Store(1)
	_, err = storecopy.Copy(ctx, src, to, storecopy.Options{})
	require.ErrorIs(t, err, errLostReply)

	// The stream grows at the source before the rerun, whose first run of
	// "a" now holds the two events already copied and one more.
	_, err = src.Append(ctx, "a", eventstore.Exact(1), e("a2"))
	require.NoError(t, err)
	r, err := storecopy.Copy(ctx, src, to, storecopy.Options{})
	require.NoError(t, err)
	assert.Equal(t, int64(2), r.Duplicates)
	assert.Equal(t, int64(1), r.Copied)
	requireSameEvents(t, readAll(t, src), readAll(t, to))
}

func TestConflictStopsTheCopy(t *testing.T) {
	ctx := context.Background()
	src, to := memory.New(), memory.New()
	for _, s := range []string{"a", "b", "c"} {
		_, err := src.Append(ctx, s, eventstore.NoStream, eventstore.EventData{Type: s, Data: []byte(`1`)}, eventstore.EventData{Type: s, Data: []byte(`2`)})
		require.NoError(t, err)
	}
	// The target holds the source's first event of b, then another one.
	b := readAll(t, src)[2:4]
	require.Equal(t, "b", b[0].StreamID)
	_, err := to.Append(ctx, "b", eventstore.NoStream, b[0].EventData, eventstore.EventData{Type: "other", Data: []byte(`x`)})
	require.NoError(t, err)

	_, err = storecopy.Copy(ctx, src, to, storecopy.Options{})
	var conflict *storecopy.ConflictError
	require.ErrorAs(t, err, &conflict)
	require.ErrorIs(t, err, storecopy.ErrConflict)
	assert.Equal(t, "b", conflict.Stream)
	assert.Equal(t, uint64(1), conflict.Version)
	assert.Equal(t, b[1].ID, conflict.SourceID)
	assert.Contains(t, err.Error(), `"b"`)
	assert.Contains(t, err.Error(), "version 1")

	got := readAll(t, to)
	streams := map[string]int{}
	for _, e := range got {
		streams[e.StreamID]++
	}
	assert.Equal(t, map[string]int{"a": 2, "b": 2}, streams, "nothing appended after the conflict")
}

func TestConflictWithAnUnrelatedStream(t *testing.T) {
	ctx := context.Background()
	src, to := memory.New(), memory.New()
	_, err := src.Append(ctx, "a", eventstore.NoStream, eventstore.EventData{Type: "t", Data: []byte(`1`)})
	require.NoError(t, err)
	_, err = to.Append(ctx, "a", eventstore.NoStream, eventstore.EventData{Type: "t", Data: []byte(`1`)})
	require.NoError(t, err)
	_, err = storecopy.Copy(ctx, src, to, storecopy.Options{})
	var conflict *storecopy.ConflictError
	require.ErrorAs(t, err, &conflict)
	assert.Equal(t, "a", conflict.Stream)
	assert.Zero(t, conflict.Version)
	require.ErrorIs(t, err, eventstore.ErrWrongVersion, "the store's refusal is wrapped")
}

func TestVerificationFindsAMismatch(t *testing.T) {
	ctx := context.Background()
	src, to := memory.New(), memory.New()
	writeLog(t, src, 3)
	_, err := storecopy.Copy(ctx, src, to, storecopy.Options{})
	require.NoError(t, err)
	last := readAll(t, to)
	_, err = to.Append(ctx, "ledger", eventstore.Any, eventstore.EventData{Type: "extra", Data: []byte(`{}`)})
	require.NoError(t, err)
	var ledger uint64
	for _, e := range last {
		if e.StreamID == "ledger" {
			ledger++
		}
	}

	r, err := storecopy.Copy(ctx, src, to, storecopy.Options{})
	require.ErrorIs(t, err, storecopy.ErrMismatch)
	require.Len(t, r.Verification.Mismatches, 1)
	m := r.Verification.Mismatches[0]
	assert.Equal(t, "ledger", m.Stream)
	assert.Equal(t, ledger, m.Version)
	assert.Equal(t, ledger, m.SourceEvents)
	assert.Equal(t, ledger+1, m.TargetEvents)
	assert.NotEqual(t, m.SourceDigest, m.TargetDigest)
}

func TestBadStores(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	var nilStore *memory.Store
	for name, c := range map[string]struct{ from, to eventstore.Store }{
		"nil from":       {nil, s},
		"nil to":         {s, nil},
		"typed nil from": {nilStore, s},
		"same store":     {s, s},
		"same, wrapped":  {withoutCheckpoints{s}, withoutCheckpoints{s}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := storecopy.Copy(ctx, c.from, c.to, storecopy.Options{})
			var bad *eventstore.InvalidArgumentError
			require.ErrorAs(t, err, &bad)
			require.ErrorIs(t, err, eventstore.ErrInvalidArgument)
		})
	}
}

func TestNamesKeepCopiesApart(t *testing.T) {
	ctx := context.Background()
	a, b, to := memory.New(), memory.New(), memory.New()
	_, err := a.Append(ctx, "from-a", eventstore.NoStream, eventstore.EventData{Type: "t", Data: []byte(`a`)})
	require.NoError(t, err)
	_, err = b.Append(ctx, "from-b", eventstore.NoStream, eventstore.EventData{Type: "t", Data: []byte(`b`)})
	require.NoError(t, err)
	ra, err := storecopy.Copy(ctx, a, to, storecopy.Options{})
	require.NoError(t, err)
	rb, err := storecopy.Copy(ctx, b, to, storecopy.Options{})
	require.NoError(t, err)
	assert.NotEqual(t, ra.Checkpoint, rb.Checkpoint)
	assert.Equal(t, int64(1), rb.Copied, "b's copy does not start after a's checkpoint")

	r, err := storecopy.Copy(ctx, a, memory.New(), storecopy.Options{Name: "nightly"})
	require.NoError(t, err)
	assert.Equal(t, storecopy.CheckpointPrefix+"nightly", r.Checkpoint)
	_, err = storecopy.Copy(ctx, a, memory.New(), storecopy.Options{Name: "bad\x00name"})
	require.ErrorIs(t, err, eventstore.ErrInvalidArgument)
}
