package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/check"
)

// snapshotTests check a [storekit.SnapshotStore].
var snapshotTests = []testCase[storekit.SnapshotStore]{
	{"MissingIsNotAnError", testSnapshotMissing},
	{"RoundTrip", testSnapshotRoundTrip},
	{"LastSaveWins", testSnapshotLastSaveWins},
	{"StreamsAreIndependent", testSnapshotStreamsIndependent},
	{"SharesNoMemory", testSnapshotSharesNoMemory},
	{"BadInputStoresNothing", testSnapshotBadInput},
	{"BadInputTable", testSnapshotBadTable},
	{"ConcurrentSaves", testSnapshotConcurrent},
	{"CanceledContext", testSnapshotCanceled},
}

func snapshotOf(stream string, version uint64, data string) storekit.Snapshot {
	return storekit.Snapshot{Stream: stream, Version: version, Type: "test.state", SchemaVersion: 3, Data: []byte(data)}
}

func mustLoadSnapshot(t testing.TB, s storekit.SnapshotStore, stream string) storekit.Snapshot {
	t.Helper()
	got, ok, err := s.LoadSnapshot(context.Background(), stream)
	check.NoError(t, err, "loading the snapshot of %q", stream)
	check.True(t, ok, "stream %q must have a snapshot", stream)
	return got
}

func testSnapshotMissing(t testing.TB, s storekit.SnapshotStore) {
	got, ok, err := s.LoadSnapshot(context.Background(), newNames(t).stream("none"))
	check.NoError(t, err)
	check.True(t, !ok)
	check.Equal(t, got, storekit.Snapshot{})
}

func testSnapshotRoundTrip(t testing.TB, s storekit.SnapshotStore) {
	stream := newNames(t).stream("a")
	before := time.Now().UTC().Add(-time.Minute)
	want := snapshotOf(stream, 41, `{"count":42}`)
	check.NoError(t, s.SaveSnapshot(context.Background(), want))

	got := mustLoadSnapshot(t, s, stream)
	check.Equal(t, got.Stream, want.Stream)
	check.Equal(t, got.Version, want.Version)
	check.Equal(t, got.Type, want.Type)
	check.Equal(t, got.SchemaVersion, want.SchemaVersion)
	check.Equal(t, got.Data, want.Data)
	check.True(t, got.RecordedAt.After(before), "RecordedAt %s must be set by the store", got.RecordedAt)
	check.Equal(t, got.RecordedAt.Location(), time.UTC, "RecordedAt must be in UTC")

	// An empty state is valid: empty, non-nil data.
	empty := snapshotOf(stream, 0, "")
	check.NoError(t, s.SaveSnapshot(context.Background(), empty))
	got = mustLoadSnapshot(t, s, stream)
	check.True(t, got.Data != nil, "empty data loads as nil")
	check.Len(t, got.Data, 0)
}

func testSnapshotLastSaveWins(t testing.TB, s storekit.SnapshotStore) {
	stream := newNames(t).stream("a")
	check.NoError(t, s.SaveSnapshot(context.Background(), snapshotOf(stream, 10, "ten")))
	check.NoError(t, s.SaveSnapshot(context.Background(), snapshotOf(stream, 20, "twenty")))
	check.Equal(t, mustLoadSnapshot(t, s, stream).Version, uint64(20))

	// A lower version replaces a higher one: the reader checks the version
	// against the stream, and a store must not keep a snapshot that its
	// writer meant to replace.
	lower := snapshotOf(stream, 5, "five")
	lower.SchemaVersion = 4
	check.NoError(t, s.SaveSnapshot(context.Background(), lower))
	got := mustLoadSnapshot(t, s, stream)
	check.Equal(t, got.Version, uint64(5))
	check.Equal(t, got.SchemaVersion, uint32(4))
	check.Equal(t, got.Data, []byte("five"))
}

func testSnapshotStreamsIndependent(t testing.TB, s storekit.SnapshotStore) {
	n := newNames(t)
	for i := range 5 {
		check.NoError(t, s.SaveSnapshot(context.Background(), snapshotOf(n.stream(fmt.Sprint(i)), uint64(i), fmt.Sprint("state ", i))))
	}
	for i := range 5 {
		got := mustLoadSnapshot(t, s, n.stream(fmt.Sprint(i)))
		check.Equal(t, got.Version, uint64(i))
		check.Equal(t, got.Data, []byte(fmt.Sprint("state ", i)))
	}
	// A stream whose name is a prefix of another's is another stream.
	_, ok, err := s.LoadSnapshot(context.Background(), n.category)
	check.NoError(t, err)
	check.True(t, !ok)
}

func testSnapshotSharesNoMemory(t testing.TB, s storekit.SnapshotStore) {
	stream := newNames(t).stream("a")
	in := snapshotOf(stream, 1, "abc")
	check.NoError(t, s.SaveSnapshot(context.Background(), in))
	in.Data[0] = 'X'
	out := mustLoadSnapshot(t, s, stream)
	check.Equal(t, out.Data, []byte("abc"), "changing the saved slice must not change the store")
	out.Data[1] = 'Y'
	check.Equal(t, mustLoadSnapshot(t, s, stream).Data, []byte("abc"), "changing a loaded slice must not change the store")
}

func testSnapshotBadInput(t testing.TB, s storekit.SnapshotStore) {
	stream := newNames(t).stream("bad")
	cases := map[string]storekit.Snapshot{
		"empty stream":     snapshotOf("", 1, "x"),
		"system stream":    snapshotOf("$"+stream, 1, "x"),
		"empty type":       {Stream: stream, Version: 1, SchemaVersion: 1, Data: []byte("x")},
		"nil data":         {Stream: stream, Version: 1, Type: "t", SchemaVersion: 1},
		"oversized data":   {Stream: stream, Version: 1, Type: "t", SchemaVersion: 1, Data: make([]byte, storekit.MaxEventSize+1)},
		"oversized type":   {Stream: stream, Version: 1, Type: string(make([]byte, storekit.MaxTypeLen+1)), Data: []byte("x")},
		"long stream name": snapshotOf(string(make([]byte, storekit.MaxStreamLen+1)), 1, "x"),
	}
	for name, snap := range cases {
		err := s.SaveSnapshot(context.Background(), snap)
		check.ErrorIs(t, err, eventstore.ErrInvalidArgument, name)
	}
	_, ok, err := s.LoadSnapshot(context.Background(), stream)
	check.NoError(t, err)
	check.True(t, !ok, "a rejected snapshot must not be stored")

	_, _, err = s.LoadSnapshot(context.Background(), "")
	check.ErrorIs(t, err, eventstore.ErrInvalidArgument, "loading with an empty stream name")
}

func testSnapshotConcurrent(t testing.TB, s storekit.SnapshotStore) {
	stream := newNames(t).stream("hot")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 20 {
				v := uint64(i*100 + j)
				if err := s.SaveSnapshot(context.Background(), snapshotOf(stream, v, fmt.Sprint(v))); err != nil {
					t.Errorf("save snapshot at %d: %v", v, err)
				}
				if _, _, err := s.LoadSnapshot(context.Background(), stream); err != nil {
					t.Errorf("load snapshot: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	got := mustLoadSnapshot(t, s, stream)
	check.Equal(t, string(got.Data), fmt.Sprint(got.Version), "a snapshot must never mix two saves")
}

func testSnapshotCanceled(t testing.TB, s storekit.SnapshotStore) {
	stream := newNames(t).stream("canceled")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	check.ErrorIs(t, s.SaveSnapshot(ctx, snapshotOf(stream, 1, "x")), context.Canceled)
	_, _, err := s.LoadSnapshot(ctx, stream)
	check.ErrorIs(t, err, context.Canceled)
	_, ok, err := s.LoadSnapshot(context.Background(), stream)
	check.NoError(t, err)
	check.True(t, !ok)
}
