package kurrentdb

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/kurrentdb/internal/testserver"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// The conformance suite checks each interface on one store; these tests
// check what only KurrentDB's streams make a question: the names of the
// state streams, several stores (processes) on one server, compaction,
// records the store cannot read, and calls cut by the server.

func openStore(t *testing.T, srv *testserver.Server) *Store {
	t.Helper()
	s, err := Open(context.Background(), srv.URL(), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func unique(what string) string { return what + "-" + uuid.NewString()[:8] }

// raw reads the records of a stream as KurrentDB returns them, $tb and
// $maxCount applied.
func raw(t *testing.T, s *Store, stream string) []*esdb.RecordedEvent {
	t.Helper()
	var out []*esdb.RecordedEvent
	_, err := s.readStream(context.Background(), stream, 0, false, 4096, func(r *esdb.RecordedEvent) (bool, error) {
		out = append(out, r)
		return true, nil
	})
	require.NoError(t, err)
	return out
}

// writeRaw appends an event the store did not write to a stream.
func writeRaw(t *testing.T, s *Store, stream, typ string, meta []byte) {
	t.Helper()
	err := s.call(context.Background(), func(ctx context.Context, cli *esdb.Client) error {
		_, err := cli.AppendToStream(ctx, stream, esdb.AppendToStreamOptions{},
			esdb.EventData{EventID: uuid.New(), EventType: typ, ContentType: esdb.ContentTypeBinary, Metadata: meta})
		return err
	})
	require.NoError(t, err)
}

// metadata reads the metadata of a stream; empty when it has none.
func metadata(t *testing.T, s *Store, stream string) *esdb.StreamMetadata {
	t.Helper()
	var m *esdb.StreamMetadata
	err := s.call(context.Background(), func(ctx context.Context, cli *esdb.Client) error {
		var err error
		m, err = cli.GetStreamMetadata(ctx, stream, esdb.ReadStreamOptions{})
		return err
	})
	if isCode(err, esdb.ErrorCodeResourceNotFound) {
		return &esdb.StreamMetadata{}
	}
	require.NoError(t, err)
	return m
}

func TestStateStreamNames(t *testing.T) {
	kinds := []string{checkpointKind, leaseKind, deadLetterKind, snapshotKind}
	long := strings.Repeat("é", storekit.MaxStreamLen/2) // 512 bytes of two-byte runes
	longer := long[:len(long)-2] + "e!"
	seen := map[string]string{}
	for _, kind := range kinds {
		for _, key := range []string{"orders", "orders-2", long, longer, "#" + strings.Repeat("0", 64) + "/x"} {
			name := stateStream(kind, key)
			require.True(t, isState(name), name)
			require.LessOrEqual(t, len(name), storekit.MaxStreamLen, "kind %s, key of %d bytes", kind, len(key))
			require.NoError(t, storekit.ValidateStream(name), "the name is one KurrentDB and Cairn take")
			prev, dup := seen[name]
			require.False(t, dup, "%s key %.20q and %s share stream %q", kind, key, prev, name)
			seen[name] = kind + " " + key
		}
	}
	require.Equal(t, StatePrefix+"checkpoint-orders", stateStream(checkpointKind, "orders"), "short names stay readable")

	// Long names work end to end, and two that differ only at their end
	// are two consumers.
	srv := testserver.New(t)
	s := openStore(t, srv)
	ctx := context.Background()
	require.NoError(t, s.SaveCheckpoint(ctx, long, eventstore.Start, eventstore.Position{Major: 7}, 1))
	cp, err := s.Checkpoint(ctx, longer)
	require.NoError(t, err)
	require.Equal(t, storekit.Checkpoint{}, cp)
	cp, err = s.Checkpoint(ctx, long)
	require.NoError(t, err)
	require.Equal(t, storekit.Checkpoint{Position: eventstore.Position{Major: 7}, Fence: 1}, cp)
}

// Each state stream holds what its kind needs and no more: the last few
// checkpoints and leases, the last snapshot.
func TestStateStreamsAreBounded(t *testing.T) {
	srv := testserver.New(t)
	s := openStore(t, srv)
	ctx := context.Background()
	name := unique("bounded")
	at := eventstore.Start
	for i := range 3 * stateHistory {
		next := eventstore.Position{Major: uint64(i + 1)}
		require.NoError(t, s.SaveCheckpoint(ctx, name, at, next, 0))
		at = next
	}
	stream := stateStream(checkpointKind, name)
	require.Equal(t, uint64(stateHistory), *metadata(t, s, stream).MaxCount())
	require.Len(t, raw(t, s, stream), stateHistory)

	snapped := unique("order")
	for v := range uint64(5) {
		require.NoError(t, s.SaveSnapshot(ctx, storekit.Snapshot{Stream: snapped, Version: v, Type: "t", Data: []byte{byte(v)}}))
	}
	stream = stateStream(snapshotKind, snapped)
	require.Equal(t, uint64(1), *metadata(t, s, stream).MaxCount())
	require.Len(t, raw(t, s, stream), 1)

	// None of it is an event of Cairn's.
	for e, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		require.NoError(t, err)
		require.False(t, isState(e.StreamID), "ReadAll yields %q", e.StreamID)
	}
}

// Two stores on one server are two processes: their compare-and-sets
// meet in KurrentDB.
func TestStateAcrossStores(t *testing.T) {
	srv := testserver.New(t)
	a, b := openStore(t, srv), openStore(t, srv)
	ctx := context.Background()

	t.Run("checkpoints", func(t *testing.T) {
		name := unique("cp")
		require.NoError(t, a.SaveCheckpoint(ctx, name, eventstore.Start, eventstore.Position{Major: 1}, 0))
		errs := make([]error, 8)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() {
				s := []*Store{a, b}[i%2]
				errs[i] = s.SaveCheckpoint(ctx, name, eventstore.Position{Major: 1}, eventstore.Position{Major: uint64(10 + i)}, 0)
			})
		}
		wg.Wait()
		won := -1
		for i, err := range errs {
			if err == nil {
				require.Equal(t, -1, won, "two saves moved the checkpoint from one position")
				won = i
				continue
			}
			require.ErrorIs(t, err, eventstore.ErrCheckpointMoved)
		}
		require.NotEqual(t, -1, won)
		for _, s := range []*Store{a, b} {
			cp, err := s.Checkpoint(ctx, name)
			require.NoError(t, err)
			require.Equal(t, eventstore.Position{Major: uint64(10 + won)}, cp.Position)
		}
	})

	t.Run("leases", func(t *testing.T) {
		name := unique("lease")
		var wg sync.WaitGroup
		got := make([]storekit.Lease, 8)
		won := make([]bool, 8)
		errs := make([]error, 8)
		for i := range got {
			wg.Go(func() {
				got[i], won[i], errs[i] = []*Store{a, b}[i%2].AcquireLease(ctx, name, fmt.Sprint("holder", i), time.Minute)
			})
		}
		wg.Wait()
		winner := -1
		for i := range won {
			require.NoError(t, errs[i])
			if won[i] {
				require.Equal(t, -1, winner, "two holders")
				winner = i
			}
		}
		require.NotEqual(t, -1, winner)
		held := got[winner]
		require.NoError(t, []*Store{a, b}[winner%2].ReleaseLease(ctx, held))
		next, ok, err := []*Store{a, b}[(winner+1)%2].AcquireLease(ctx, name, "late", time.Minute)
		require.NoError(t, err)
		require.True(t, ok)
		require.Greater(t, next.Fence, held.Fence)
	})

	t.Run("dead letters", func(t *testing.T) {
		consumer := unique("dl")
		d := deadLetter(consumer, 1)
		parked, err := a.ParkDeadLetter(ctx, d)
		require.NoError(t, err)
		// b folds a's records; a's fold is stale after b writes, and a
		// compare-and-set on it is still decided on the stream.
		read, err := b.DeadLetter(ctx, consumer, parked.ID)
		require.NoError(t, err)
		read.Error = "b's retry failed"
		_, err = b.ParkDeadLetter(ctx, read)
		require.NoError(t, err)
		parked.Error = "a's stale retry"
		_, err = a.ParkDeadLetter(ctx, parked)
		var changed *storekit.DeadLetterChangedError
		require.ErrorAs(t, err, &changed)
		require.Equal(t, uint64(2), changed.Actual)

		// Racing compare-and-sets on one generation: one wins.
		read, err = a.DeadLetter(ctx, consumer, parked.ID)
		require.NoError(t, err)
		errs := make([]error, 8)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() {
				claim := read
				claim.ClaimedUntil = time.Now().Add(time.Minute)
				_, errs[i] = []*Store{a, b}[i%2].ParkDeadLetter(ctx, claim)
			})
		}
		wg.Wait()
		wins := 0
		for _, err := range errs {
			if err == nil {
				wins++
				continue
			}
			require.ErrorIs(t, err, eventstore.ErrDeadLetterChanged)
		}
		require.Equal(t, 1, wins)

		require.NoError(t, b.DeleteDeadLetter(ctx, consumer, parked.ID))
		n, err := a.CountDeadLetters(ctx, consumer)
		require.NoError(t, err)
		require.Zero(t, n, "a sees b's delete")
	})
}

func deadLetter(consumer string, version uint64) eventstore.DeadLetter {
	at := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	return eventstore.DeadLetter{
		Consumer: consumer,
		Event: eventstore.Event{EventData: eventstore.EventData{ID: uuid.New(), Type: "order.placed", SchemaVersion: 1,
			Data: []byte(fmt.Sprintf(`{"n":%d}`, version))}, StreamID: "order-1", Version: version,
			Position: eventstore.Position{Major: version + 1}},
		Error: "boom", Attempts: 1, FirstFailure: at, LastFailure: at,
	}
}

func letters(t *testing.T, s *Store, consumer string) []eventstore.DeadLetter {
	t.Helper()
	var out []eventstore.DeadLetter
	for d, err := range s.DeadLetters(context.Background(), consumer) {
		require.NoError(t, err)
		out = append(out, d)
	}
	return out
}

// A dead-letter stream is compacted as it grows: its older records are
// truncated, and a fold from what is left is the same, for a store that
// starts cold and for one whose fold the truncation overtook.
func TestDeadLetterCompaction(t *testing.T) {
	srv := testserver.New(t)
	a, late := openStore(t, srv), openStore(t, srv)
	a.caches().compactAfter = 8
	ctx := context.Background()
	consumer := unique("compact")
	stream := stateStream(deadLetterKind, consumer)

	var keep []eventstore.DeadLetter
	for v := range uint64(3) {
		d, err := a.ParkDeadLetter(ctx, deadLetter(consumer, v))
		require.NoError(t, err)
		keep = append(keep, d)
	}
	require.Len(t, letters(t, late, consumer), 3, "late folds now, before the compactions")
	for i := range 20 {
		gone, err := a.ParkDeadLetter(ctx, deadLetter(consumer, uint64(100+i)))
		require.NoError(t, err)
		require.NoError(t, a.DeleteDeadLetter(ctx, consumer, gone.ID))
		keep[1].Attempts = i + 2
		keep[1], err = a.ParkDeadLetter(ctx, keep[1])
		require.NoError(t, err)
	}

	records := raw(t, a, stream)
	tb := metadata(t, a, stream).TruncateBefore()
	require.NotNil(t, tb, "the stream was never compacted")
	require.Equal(t, *tb, records[0].EventNumber, "reads start at $tb")
	require.Less(t, len(records), 3+8+8, "compaction keeps the stream short: %d records", len(records))

	want := letters(t, a, consumer)
	require.Len(t, want, 3)
	require.Equal(t, 21, want[1].Attempts)
	cold := openStore(t, srv)
	require.Equal(t, want, letters(t, cold, consumer), "a fold of the compacted stream")
	require.Equal(t, want, letters(t, late, consumer), "a fold overtaken by the truncation")
	n, err := late.CountDeadLetters(ctx, consumer)
	require.NoError(t, err)
	require.Equal(t, 3, n)
}

// A compaction with no live dead letter left (found by review): it
// restates none, so $tb goes to its marker, the one record left. A store
// that folds the stream afresh (another process, a restart, an evicted
// fold) learns the stream's revision from the marker, and one whose fold
// the compaction overtook sees the gap at the marker and starts over:
// every process can still write. Before the marker, $tb went past the
// stream's end, and every store but the compacting one was refused for
// good ("lost the race to other writers 64 times").
func TestDeadLettersCompactedToNone(t *testing.T) {
	srv := testserver.New(t)
	a, late := openStore(t, srv), openStore(t, srv)
	ctx := context.Background()
	consumer := unique("empty-compaction")
	stream := stateStream(deadLetterKind, consumer)
	letter := func(i int) eventstore.DeadLetter {
		return eventstore.DeadLetter{Consumer: consumer, Error: "boom", Attempts: 1,
			Event: eventstore.Event{EventData: eventstore.EventData{ID: uuid.New(), Type: "t", Data: []byte(`{}`)},
				StreamID: "orders", Version: uint64(i), Position: eventstore.Position{Major: uint64(i + 1)}}}
	}
	d, err := a.ParkDeadLetter(ctx, letter(0))
	require.NoError(t, err)
	n, err := late.CountDeadLetters(ctx, consumer) // late folds now: 1 letter
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NoError(t, a.DeleteDeadLetter(ctx, consumer, d.ID))
	for i := 1; i < defaultCompactAfter/2; i++ { // 256 records, none live: a compaction
		d, err := a.ParkDeadLetter(ctx, letter(i))
		require.NoError(t, err)
		require.NoError(t, a.DeleteDeadLetter(ctx, consumer, d.ID))
	}
	n, err = a.CountDeadLetters(ctx, consumer)
	require.NoError(t, err)
	require.Equal(t, 0, n)

	records := raw(t, a, stream)
	require.Equal(t, 1, len(records), "compacted to its marker")
	require.Equal(t, compactedRecord, records[0].EventType)
	require.Equal(t, uint64(defaultCompactAfter), records[0].EventNumber)
	tb := metadata(t, a, stream).TruncateBefore()
	require.NotNil(t, tb)
	require.Equal(t, records[0].EventNumber, *tb, "$tb is the marker's")

	n, err = late.CountDeadLetters(ctx, consumer)
	require.NoError(t, err)
	require.Equal(t, 0, n, "a fold from before the compaction lists no deleted letter")

	cold := openStore(t, srv)
	_, err = cold.ParkDeadLetter(ctx, letter(1000))
	require.NoError(t, err, "another process parks after the compaction")
	_, err = late.ParkDeadLetter(ctx, letter(1001))
	require.NoError(t, err, "a process whose fold the compaction overtook parks")
	_, err = a.ParkDeadLetter(ctx, letter(1002))
	require.NoError(t, err, "the compacting process parks")
	want := letters(t, openStore(t, srv), consumer)
	require.Len(t, want, 3)
	for _, s := range []*Store{a, late, cold} {
		require.Equal(t, want, letters(t, s, consumer))
	}
}

// A compaction cut short, after its marker and part of the restated
// letters or before its $tb, leaves records that fold to the dead letters
// it found, for the store that compacted, for one whose fold is older and
// for one that folds afresh; they all write on, and the next compaction
// completes.
func TestDeadLetterCompactionCutShort(t *testing.T) {
	const live = compactRecords + 6 // the restatement takes two appends
	for _, c := range []struct {
		name string
		// passed is how many appends of the write that makes the
		// compaction due (its own, then the compaction's) get through
		// before the connection is lost.
		passed int
		// kept is how many records the compaction leaves.
		kept int
	}{
		{"after the marker's append", 2, compactRecords},
		{"before $tb", 3, 1 + live},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := testserver.New(t)
			a, late := openStore(t, srv), openStore(t, srv)
			a.caches().compactAfter = 8
			ctx := context.Background()
			consumer := unique("cut")
			stream := stateStream(deadLetterKind, consumer)

			var keep []eventstore.DeadLetter
			for v := range uint64(live) {
				d, err := a.ParkDeadLetter(ctx, deadLetter(consumer, v))
				require.NoError(t, err)
				keep = append(keep, d)
			}
			require.Len(t, letters(t, late, consumer), live, "late folds now, before the compaction")
			// A compaction is due once superseded records are as many as
			// the live letters: at the live-th update.
			for i := range live {
				if i == live-1 {
					for range c.passed {
						srv.DisconnectNextAppend(0) // a zero Disconnect lets the append through
					}
					srv.DisconnectNextAppend(testserver.BeforeCommit)
				}
				keep[0].Attempts = i + 2
				var err error
				keep[0], err = a.ParkDeadLetter(ctx, keep[0])
				require.NoError(t, err, "a compaction's failure is not its write's")
			}

			records := raw(t, a, stream)
			require.Equal(t, 2*live+c.kept, len(records), "the compaction was cut where planned")
			require.Equal(t, compactedRecord, records[2*live].EventType)
			require.Nil(t, metadata(t, a, stream).TruncateBefore(), "the compaction was cut before its $tb")

			want := letters(t, a, consumer)
			require.Len(t, want, live)
			require.Equal(t, live+1, want[0].Attempts)
			cold := openStore(t, srv)
			require.Equal(t, want, letters(t, cold, consumer), "a fold from the start")
			require.Equal(t, want, letters(t, late, consumer), "a fold from before the compaction")

			// Every store writes on, and a's writes complete a compaction.
			for i, s := range []*Store{late, cold, a} {
				d, err := s.ParkDeadLetter(ctx, deadLetter(consumer, uint64(1000+i)))
				require.NoError(t, err)
				require.NoError(t, s.DeleteDeadLetter(ctx, consumer, keep[i+1].ID))
				require.NoError(t, s.DeleteDeadLetter(ctx, consumer, d.ID))
			}
			for i := 0; metadata(t, a, stream).TruncateBefore() == nil; i++ {
				require.Less(t, i, 4*live, "the stream was never compacted")
				keep[0].Attempts = 1000 + i
				var err error
				keep[0], err = a.ParkDeadLetter(ctx, keep[0])
				require.NoError(t, err)
			}
			tb := *metadata(t, a, stream).TruncateBefore()
			records = raw(t, a, stream)
			require.Equal(t, tb, records[0].EventNumber)
			require.Equal(t, compactedRecord, records[0].EventType, "$tb is at a marker")

			want = letters(t, a, consumer)
			require.Len(t, want, live-3)
			for _, s := range []*Store{late, cold, openStore(t, srv)} {
				require.Equal(t, want, letters(t, s, consumer))
			}
		})
	}
}

// A record the store cannot read is ErrCorrupt, naming its stream; so is
// one in the right stream that says it belongs to another.
func TestStateCorrupt(t *testing.T) {
	srv := testserver.New(t)
	s := openStore(t, srv)
	ctx := context.Background()
	for _, c := range []struct {
		what, typ, meta string
	}{
		{"not JSON", checkpointRecord, `{"consumer":`},
		{"an unknown field", checkpointRecord, `{"consumer":"%s","position":"1/0","fence":1,"more":1}`},
		{"another consumer's", checkpointRecord, `{"consumer":"other","position":"1/0","fence":1}`},
		{"another type", "order.placed", `{}`},
		{"trailing data", checkpointRecord, `{"consumer":"%s","position":"1/0","fence":1} {}`},
	} {
		name := unique("corrupt")
		stream := stateStream(checkpointKind, name)
		meta := c.meta
		if strings.Contains(meta, "%s") {
			meta = fmt.Sprintf(meta, name)
		}
		writeRaw(t, s, stream, c.typ, []byte(meta))
		_, err := s.Checkpoint(ctx, name)
		require.ErrorIs(t, err, eventstore.ErrCorrupt, c.what)
		require.ErrorContains(t, err, stream, c.what)
		err = s.SaveCheckpoint(ctx, name, eventstore.Start, eventstore.Position{Major: 1}, 0)
		require.ErrorIs(t, err, eventstore.ErrCorrupt, c.what)
	}

	consumer := unique("corrupt")
	_, err := s.ParkDeadLetter(ctx, deadLetter(consumer, 1))
	require.NoError(t, err)
	stream := stateStream(deadLetterKind, consumer)
	writeRaw(t, s, stream, parkedRecord, []byte(`{"id":"x"}`))
	_, err = s.CountDeadLetters(ctx, consumer)
	require.ErrorIs(t, err, eventstore.ErrCorrupt)
	require.ErrorContains(t, err, stream)

	lease := unique("corrupt")
	writeRaw(t, s, stateStream(leaseKind, lease), leaseRecord, fmt.Appendf(nil, `{"name":%q,"holder":"A","fence":0}`, lease))
	_, _, err = s.AcquireLease(ctx, lease, "B", time.Minute)
	require.ErrorIs(t, err, eventstore.ErrCorrupt, "fence 0, which no lease has")

	snapped := unique("order")
	writeRaw(t, s, stateStream(snapshotKind, snapped), snapshotRecord, []byte(`{"stream":"order-9","version":1,"type":"t","schema_version":1}`))
	_, _, err = s.LoadSnapshot(ctx, snapped)
	require.ErrorIs(t, err, eventstore.ErrCorrupt, "another stream's snapshot")
}

// A call the server cuts is ErrUnavailable, and what it may have written
// is what the next call finds.
func TestStateUnderFaults(t *testing.T) {
	srv := testserver.New(t)
	s := openStore(t, srv)
	ctx := context.Background()

	name := unique("cp")
	srv.FailNext(testserver.Append, 1, codes.Unavailable)
	err := s.SaveCheckpoint(ctx, name, eventstore.Start, eventstore.Position{Major: 1}, 0)
	require.ErrorIs(t, err, eventstore.ErrUnavailable)
	require.NoError(t, s.SaveCheckpoint(ctx, name, eventstore.Start, eventstore.Position{Major: 1}, 0))

	consumer := unique("dl")
	first, err := s.ParkDeadLetter(ctx, deadLetter(consumer, 1))
	require.NoError(t, err)
	srv.DisconnectNextAppend(testserver.AfterCommit)
	_, err = s.ParkDeadLetter(ctx, deadLetter(consumer, 2))
	require.Error(t, err, "the reply was lost")
	got := letters(t, s, consumer)
	require.Len(t, got, 2, "the park was written, and the fold reads it")
	require.Equal(t, first.ID, got[0].ID)
	first.Error = "retried"
	_, err = s.ParkDeadLetter(ctx, first)
	require.NoError(t, err, "the fold is where the stream is")

	srv.FailNext(testserver.Read, 1, codes.Unavailable)
	_, err = s.CountDeadLetters(ctx, consumer)
	require.ErrorIs(t, err, eventstore.ErrUnavailable)
	n, err := s.CountDeadLetters(ctx, consumer)
	require.NoError(t, err)
	require.Equal(t, 2, n)
}

// A dead-letter stream deleted outside Cairn holds no dead letters, and
// the next park makes it again, its revisions going on from before.
func TestDeadLettersDeletedOutside(t *testing.T) {
	srv := testserver.New(t)
	s := openStore(t, srv)
	ctx := context.Background()
	consumer := unique("deleted")
	for v := range uint64(3) {
		_, err := s.ParkDeadLetter(ctx, deadLetter(consumer, v))
		require.NoError(t, err)
	}
	stream := stateStream(deadLetterKind, consumer)
	err := s.call(ctx, func(ctx context.Context, cli *esdb.Client) error {
		_, err := cli.DeleteStream(ctx, stream, esdb.DeleteStreamOptions{ExpectedRevision: esdb.Revision(2)})
		return err
	})
	require.NoError(t, err)
	n, err := s.CountDeadLetters(ctx, consumer)
	require.NoError(t, err)
	require.Zero(t, n)

	d, err := s.ParkDeadLetter(ctx, deadLetter(consumer, 7))
	require.NoError(t, err)
	require.Equal(t, uint64(1), d.Generation, "a new dead letter")
	records := raw(t, s, stream)
	require.Len(t, records, 1)
	require.Equal(t, uint64(3), records[0].EventNumber, "the numbering goes on")
	d.Error = "again"
	_, err = s.ParkDeadLetter(ctx, d)
	require.NoError(t, err, "the fold knows where the stream is")
	require.Len(t, letters(t, openStore(t, srv), consumer), 1)
}

// Every consumer-state method of a closed store fails with ErrClosed (the
// conformance suite calls one of each interface).
func TestStateAfterClose(t *testing.T) {
	srv := testserver.New(t)
	s := openStore(t, srv)
	ctx := context.Background()
	consumer := unique("closed")
	l, _, err := s.AcquireLease(ctx, consumer, "A", time.Minute)
	require.NoError(t, err)
	d, err := s.ParkDeadLetter(ctx, deadLetter(consumer, 1))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	for what, err := range map[string]error{
		"RenewLease":       func() error { _, err := s.RenewLease(ctx, l, time.Minute); return err }(),
		"ReleaseLease":     s.ReleaseLease(ctx, l),
		"ParkDeadLetter":   func() error { _, err := s.ParkDeadLetter(ctx, d); return err }(),
		"DeadLetter":       func() error { _, err := s.DeadLetter(ctx, consumer, d.ID); return err }(),
		"DeleteDeadLetter": s.DeleteDeadLetter(ctx, consumer, d.ID),
		"DeadLetters":      func() error { return letterErr(s.DeadLetters(ctx, consumer)) }(),
		"DeadLetterKeys": func() error {
			for _, err := range s.DeadLetterKeys(ctx, consumer, eventstore.Start, eventstore.Position{Major: 9}) {
				return err
			}
			return nil
		}(),
		"SaveSnapshot": s.SaveSnapshot(ctx, storekit.Snapshot{Stream: "order-1", Type: "t", Data: []byte{}}),
	} {
		require.ErrorIs(t, err, eventstore.ErrClosed, what)
	}
}

func letterErr(seq func(func(eventstore.DeadLetter, error) bool)) error {
	for _, err := range seq {
		return err
	}
	return nil
}
