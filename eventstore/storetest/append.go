package storetest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/check"
	"github.com/cairn-es/cairn/internal/clip"
)

var appendTests = []test{
	{"RoundTripsEveryField", testRoundTrip},
	{"AssignsIDsToZeroIDs", testAssignsIDs},
	{"ExpectedVersionOnAbsentStream", testExpectedOnAbsent},
	{"ExpectedVersionOnExistingStream", testExpectedOnExisting},
	{"MultiEventAppendIsAllOrNothing", testAtomicity},
	{"VersionsAndPositionsOfResult", testAppendResult},
	{"SharesNoMemory", testAppendSharesNoMemory},
}

// testAppendSharesNoMemory changes the bytes of appended and of read events
// and reads again: the store must keep what was appended. Payloads of a
// few bytes, one after the other, and a large one, so that a store that
// packs small payloads together is checked at their borders too; appending
// to a read payload must not reach its neighbour's.
func testAppendSharesNoMemory(t testing.TB, s eventstore.Store) {
	stream := newNames(t).stream("shares-no-memory")
	payloads := [][]byte{[]byte("abc"), {}, []byte("defg"), bytes.Repeat([]byte("h"), 32<<10), []byte("ij")}
	want := make([][]byte, len(payloads))
	in := make([]eventstore.EventData, len(payloads))
	for i, p := range payloads {
		want[i] = bytes.Clone(p)
		in[i] = eventstore.EventData{Type: "t", Data: p}
	}
	mustAppend(t, s, stream, eventstore.NoStream, in[:2]...)
	mustAppend(t, s, stream, eventstore.Exact(1), in[2:]...)
	for _, p := range payloads {
		for j := range p {
			p[j] = 'X'
		}
	}
	verify := func(what string) {
		got := readStream(t, s, stream, eventstore.Forward(0))
		check.Len(t, got, len(want), what)
		for i, e := range got {
			check.True(t, bytes.Equal(e.Data, want[i]), "%s: event %d holds %s, want %s", what, i, clip.Quote(string(e.Data)), clip.Quote(string(want[i])))
		}
	}
	verify("after the caller changed the appended data")
	for _, e := range readStream(t, s, stream, eventstore.Forward(0)) {
		for j := range e.Data {
			e.Data[j] = 'Y'
		}
		_ = append(e.Data, 'Z', 'Z', 'Z')
	}
	verify("after the reader changed and appended to the read data")
}

func testRoundTrip(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	stream := n.stream("round-trip")
	want := []eventstore.EventData{
		{
			ID:            uuid.New(),
			Type:          "order.placed",
			SchemaVersion: 3,
			Data:          []byte(`{"order":"o-1","total":"12.50","note":"ünïcödé ✓"}`),
			Metadata: eventstore.Metadata{
				CorrelationID: "corr-1",
				CausationID:   "cause-1",
				CommandID:     "cmd-1",
				Extra:         map[string]string{"tenant": "acme", "user": "u-7", "empty": ""},
			},
		},
		{ID: uuid.New(), Type: "order.noted", SchemaVersion: 1, Data: []byte{}},
		{ID: uuid.New(), Type: "blob.stored", SchemaVersion: 7, Data: bytes.Repeat([]byte{0, 1, 2, 0xff}, 64<<10)},
	}
	before := time.Now().Add(-time.Minute)
	mustAppend(t, s, stream, eventstore.NoStream, want...)
	after := time.Now().Add(time.Minute)

	verify := func(source string, got []eventstore.Event) {
		check.Len(t, got, len(want), source)
		for i, e := range got {
			w := want[i]
			check.Equal(t, e.ID, w.ID, "%s: event %d ID", source, i)
			check.Equal(t, e.Type, w.Type, "%s: event %d type", source, i)
			check.Equal(t, e.SchemaVersion, w.SchemaVersion, "%s: event %d schema version", source, i)
			check.True(t, bytes.Equal(w.Data, e.Data), "%s: event %d data differs (%d bytes, want %d)", source, i, len(e.Data), len(w.Data))
			check.True(t, e.Data != nil, "%s: event %d data is nil", source, i)
			check.Equal(t, e.Metadata, w.Metadata, "%s: event %d metadata", source, i)
			check.Equal(t, e.StreamID, stream, "%s: event %d stream", source, i)
			check.Equal(t, e.Version, uint64(i), "%s: event %d version", source, i)
			check.True(t, !e.Position.IsZero(), "%s: event %d has the zero position", source, i)
			check.Equal(t, e.RecordedAt.Location(), time.UTC, "%s: event %d recorded time is not UTC", source, i)
			check.True(t, e.RecordedAt.After(before) && e.RecordedAt.Before(after),
				"%s: event %d recorded at %s, not around now", source, i, e.RecordedAt)
		}
		requireIncreasing(t, got)
	}
	verify("ReadStream", readStream(t, s, stream, eventstore.Forward(0)))
	verify("ReadAll", readAll(t, s, eventstore.Start, n.filter()))

	// Stores may write a lone event another way than a batch: the same
	// events appended one at a time read back the same.
	single := n.stream("one-by-one")
	for i, e := range want {
		e.ID = uuid.New()
		want[i] = e
		mustAppend(t, s, single, eventstore.Any, e)
	}
	stream = single // verify compares it with each event's stream
	verify("ReadStream of single appends", readStream(t, s, single, eventstore.Forward(0)))

	// What the store returns is a copy: changing it changes nothing stored.
	first := readStream(t, s, stream, eventstore.Forward(0))[0]
	first.Data[0] = 'X'
	first.Metadata.Extra["tenant"] = "changed"
	again := readStream(t, s, stream, eventstore.Forward(0))[0]
	check.Equal(t, again.Data, want[0].Data)
	check.Equal(t, again.Metadata.Extra["tenant"], "acme")
}

func testAssignsIDs(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	stream := n.stream("ids")
	in := []eventstore.EventData{
		{Type: "a", Data: []byte(`{}`)},
		{Type: "b", Data: []byte(`{}`)},
	}
	mustAppend(t, s, stream, eventstore.NoStream, in...)
	check.Equal(t, in[0].ID, uuid.UUID{}, "the caller's events must not be modified")
	got := readStream(t, s, stream, eventstore.Forward(0))
	check.Len(t, got, 2)
	for i, e := range got {
		check.Equal(t, e.ID.Version(), uuid.Version(7), "event %d: assigned ID %s is not a UUIDv7", i, e.ID)
	}
	check.True(t, got[0].ID != got[1].ID, "two events were assigned one ID, %s", got[0].ID)
}

// wrongVersion checks that err is a conflict naming the stream, what was
// expected and what the stream actually was.
func wrongVersion(t testing.TB, err error, stream string, expected, actual eventstore.ExpectedVersion) {
	t.Helper()
	check.True(t, err != nil, "append to %q expecting %s, while it is at %s: no wrong-version error", stream, expected, actual)
	check.ErrorIs(t, err, eventstore.ErrWrongVersion)
	var wv *eventstore.WrongVersionError
	check.ErrorAs(t, err, &wv)
	check.Equal(t, wv.Stream, stream)
	check.Equal(t, wv.Expected, expected)
	check.Equal(t, wv.Actual, actual, "actual state reported by the conflict")
	check.Contains(t, err.Error(), stream, "the message names the stream")
}

func testExpectedOnAbsent(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	ctx := context.Background()
	for _, expected := range []eventstore.ExpectedVersion{eventstore.StreamExists, eventstore.Exact(0), eventstore.Exact(4)} {
		stream := n.stream("absent")
		_, err := s.Append(ctx, stream, expected, event("x", "1"))
		wrongVersion(t, err, stream, expected, eventstore.NoStream)
		check.Len(t, readStream(t, s, stream, eventstore.Forward(0)), 0, "a failed append wrote to %q", stream)
	}
	for i, expected := range []eventstore.ExpectedVersion{eventstore.Any, eventstore.NoStream} {
		stream := n.stream(expected.String())
		r := mustAppend(t, s, stream, expected, event("x", "1"), event("x", "2"))
		check.Equal(t, r.FirstVersion, uint64(0), "case %d", i)
		check.Equal(t, r.LastVersion, uint64(1), "case %d", i)
	}
}

func testExpectedOnExisting(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	ctx := context.Background()
	stream := n.stream("existing")
	mustAppend(t, s, stream, eventstore.NoStream, events("x", 3)...) // versions 0..2

	for _, expected := range []eventstore.ExpectedVersion{eventstore.NoStream, eventstore.Exact(0), eventstore.Exact(1), eventstore.Exact(3), eventstore.Exact(100)} {
		_, err := s.Append(ctx, stream, expected, event("x", "lost"))
		wrongVersion(t, err, stream, expected, eventstore.Exact(2))
	}
	check.Len(t, readStream(t, s, stream, eventstore.Forward(0)), 3, "failed appends wrote events")

	r := mustAppend(t, s, stream, eventstore.Exact(2), event("x", "3"))
	check.Equal(t, r.LastVersion, uint64(3))
	r = mustAppend(t, s, stream, eventstore.StreamExists, event("x", "4"))
	check.Equal(t, r.LastVersion, uint64(4))
	r = mustAppend(t, s, stream, eventstore.Any, event("x", "5"), event("x", "6"))
	check.Equal(t, r.FirstVersion, uint64(5))
	check.Equal(t, r.LastVersion, uint64(6))

	got := readStream(t, s, stream, eventstore.Forward(0))
	check.Len(t, got, 7)
	for i, e := range got {
		check.Equal(t, e.Version, uint64(i))
	}
}

func testAtomicity(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	ctx := context.Background()
	stream := n.stream("atomic")
	mustAppend(t, s, stream, eventstore.NoStream, event("x", "0"))

	// A conflict rejects the whole batch.
	_, err := s.Append(ctx, stream, eventstore.Exact(7), events("x", 5)...)
	check.ErrorIs(t, err, eventstore.ErrWrongVersion)

	// One bad event rejects the whole batch.
	batch := events("x", 5)
	batch[3].Type = ""
	_, err = s.Append(ctx, stream, eventstore.Exact(0), batch...)
	check.ErrorIs(t, err, eventstore.ErrInvalidArgument)

	// A batch that repeats a stored ID in the middle rejects the whole batch.
	stored := readStream(t, s, stream, eventstore.Forward(0))[0]
	batch = events("x", 5)
	batch[2].ID = stored.ID
	_, err = s.Append(ctx, stream, eventstore.Any, batch...)
	check.ErrorIs(t, err, eventstore.ErrEventIDConflict)

	got := readStream(t, s, stream, eventstore.Forward(0))
	check.Len(t, got, 1, "a rejected multi-event append left events behind")
	check.Len(t, readAll(t, s, eventstore.Start, n.filter()), 1)

	// And a good batch writes all of its events, contiguously.
	batch = events("x", 50)
	r := mustAppend(t, s, stream, eventstore.Exact(0), batch...)
	check.Equal(t, r.FirstVersion, uint64(1))
	check.Equal(t, r.LastVersion, uint64(50))
	got = readStream(t, s, stream, eventstore.Forward(1))
	check.Equal(t, recordedIDs(got), ids(batch))
}

func testAppendResult(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	a, b := n.stream("a"), n.stream("b")
	r1 := mustAppend(t, s, a, eventstore.NoStream, events("x", 3)...)
	r2 := mustAppend(t, s, b, eventstore.NoStream, events("x", 2)...)
	r3 := mustAppend(t, s, a, eventstore.Exact(2), events("x", 1)...)
	check.Equal(t, r1, eventstore.AppendResult{FirstVersion: 0, LastVersion: 2, Position: r1.Position})
	check.Equal(t, r2, eventstore.AppendResult{FirstVersion: 0, LastVersion: 1, Position: r2.Position})
	check.Equal(t, r3, eventstore.AppendResult{FirstVersion: 3, LastVersion: 3, Position: r3.Position})
	check.True(t, r1.Position.Before(r2.Position) && r2.Position.Before(r3.Position),
		"sequential appends have increasing positions: %s %s %s", r1.Position, r2.Position, r3.Position)

	// The result's position is that of the last event written.
	got := readStream(t, s, a, eventstore.Forward(0))
	check.Len(t, got, 4)
	check.Equal(t, got[2].Position, r1.Position)
	check.Equal(t, got[3].Position, r3.Position)
}

// requireNothingWritten checks that this test's category holds no events.
func requireNothingWritten(t testing.TB, s eventstore.Store, n names, why string) {
	t.Helper()
	got := readAll(t, s, eventstore.Start, n.filter())
	check.Len(t, got, 0, "%s: yet %d events were written", why, len(got))
}

// isCanceled reports whether err says the context was canceled.
func isCanceled(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
