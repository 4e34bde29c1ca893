package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/testrig/race"
)

// Review (S3) of the command index without the command bus's appends
// (derived_id, schema step 6): CommandResult must answer as the release
// before did, for every mix of events, on every write path.

// s3Named returns n events of command cmd named as the bus names them for
// stream named, from index from on.
func s3Named(named, cmd string, from, n int) []eventstore.EventData {
	evs := make([]eventstore.EventData, n)
	for i := range evs {
		evs[i] = eventstore.EventData{ID: storekit.CommandEventID(named, cmd, from+i), Type: "x", Data: []byte("{}"),
			Metadata: eventstore.Metadata{CommandID: cmd}}
	}
	return evs
}

// s3Plain returns n events of command cmd with IDs of their own.
func s3Plain(cmd string, n int) []eventstore.EventData {
	evs := make([]eventstore.EventData, n)
	for i := range evs {
		evs[i] = eventstore.EventData{ID: eventstore.NewEventID(), Type: "x", Data: []byte("{}"),
			Metadata: eventstore.Metadata{CommandID: cmd}}
	}
	return evs
}

// s3OldResult is the answer of the release before schema step 6: every
// event of the stream that records the command, without any index.
func s3OldResult(t *testing.T, s *Store, stream, cmd string) (eventstore.AppendResult, bool) {
	t.Helper()
	var first, last, pos sql.NullInt64
	require.NoError(t, s.readers.QueryRow(`SELECT min(version), max(version), max(position)
		FROM cairn_events NOT INDEXED WHERE stream = ? AND command_id = ?`, stream, cmd).Scan(&first, &last, &pos))
	if !first.Valid {
		return eventstore.AppendResult{}, false
	}
	return eventstore.AppendResult{FirstVersion: uint64(first.Int64), LastVersion: uint64(last.Int64),
		Position: eventstore.Position{Major: uint64(pos.Int64)}, Duplicate: true}, true
}

// s3Marks returns derived_id of the stream's events, by version.
func s3Marks(t *testing.T, s *Store, stream string) map[uint64]int64 {
	t.Helper()
	rows, err := s.readers.Query(`SELECT version, derived_id FROM cairn_events WHERE stream = ?`, stream)
	require.NoError(t, err)
	defer rows.Close()
	out := map[uint64]int64{}
	for rows.Next() {
		var v, d int64
		require.NoError(t, rows.Scan(&v, &d))
		out[uint64(v)] = d
	}
	require.NoError(t, rows.Err())
	return out
}

var (
	s3Streams  = []string{"s3-a", "s3-b", "s3-c"}
	s3Commands = []string{"c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7"}
	s3Sizes    = []int{1, 1, 2, 3, 15, 16, 17, 18, 33, 34}
)

// s3RandomAppend returns an append to stream: the bus's, a caller's, or
// something in between.
func s3RandomAppend(r *rand.Rand, stream string, history [][]eventstore.EventData) []eventstore.EventData {
	cmd := s3Commands[r.IntN(len(s3Commands))]
	n := s3Sizes[r.IntN(len(s3Sizes))]
	switch r.IntN(12) {
	case 0, 1, 2, 3: // the bus's
		return s3Named(stream, cmd, 0, n)
	case 4: // a caller's command
		return s3Plain(cmd, n)
	case 5: // the bus's names, counted on from a later index
		return s3Named(stream, cmd, 1+r.IntN(3), n)
	case 6: // the bus's names, then one of the caller's
		return append(s3Named(stream, cmd, 0, n), s3Plain(cmd, 1)...)
	case 7: // the bus's names for another stream
		return s3Named(s3Streams[r.IntN(len(s3Streams))], cmd, 0, n)
	case 8: // names of one command, recording another
		evs := s3Named(stream, cmd, 0, n)
		other := s3Commands[r.IntN(len(s3Commands))]
		for i := range evs {
			evs[i].Metadata.CommandID = other
		}
		return evs
	case 9: // the bus's names, two swapped
		evs := s3Named(stream, cmd, 0, max(n, 2))
		evs[0], evs[1] = evs[1], evs[0]
		return evs
	case 10: // no command
		evs := s3Plain("", n)
		return evs
	default: // an earlier append again, whole or in part
		if len(history) == 0 {
			return s3Named(stream, cmd, 0, n)
		}
		h := history[r.IntN(len(history))]
		from := r.IntN(len(h))
		to := from + 1 + r.IntN(len(h)-from)
		return append([]eventstore.EventData(nil), h[from:to]...)
	}
}

type s3Op struct {
	stream string
	events []eventstore.EventData
}

// TestReviewS3CommandResultAsBefore appends random mixes of the bus's and
// other commands' events, alone, in groups and in InTx, and checks that
// CommandResult answers for every stream and command as a scan of every
// event that records the command does (the answer before step 6), and that
// derived_id marks exactly the appends that storekit.CommandIDsDerived
// recognizes.
func TestReviewS3CommandResultAsBefore(t *testing.T) {
	race.Outside(t)
	for seed := range s3Seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			s3RunModel(t, openTest(t), seed, map[string][][]eventstore.EventData{}, map[string]map[uint64]int64{})
		})
	}
}

// s3Seeds is how many seeds TestReviewS3CommandResultAsBefore runs.
var s3Seeds = uint64(6)

// s3RunModel appends at random to s, whose streams already hold the
// appends of history, with the marks of wantMark, then checks every
// command of every stream.
func s3RunModel(t *testing.T, s *Store, seed uint64, history map[string][][]eventstore.EventData, wantMark map[string]map[uint64]int64) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(seed, 7))
	var written, derived, dups, refused int
	defer func() {
		t.Logf("appends: %d written (%d the bus's), %d repeats, %d refused", written, derived, dups, refused)
	}()
	record := func(op s3Op, res eventstore.AppendResult, err error) {
		if err != nil {
			refused++
			require.True(t, errors.Is(err, eventstore.ErrEventIDConflict), "append to %s: %v", op.stream, err)
			return
		}
		history[op.stream] = append(history[op.stream], op.events)
		if res.Duplicate {
			dups++
			return
		}
		written++
		require.Equal(t, uint64(len(op.events)), res.LastVersion-res.FirstVersion+1)
		if wantMark[op.stream] == nil {
			wantMark[op.stream] = map[uint64]int64{}
		}
		mark := int64(0)
		if storekit.CommandIDsDerived(op.stream, op.events) {
			mark = 1
			derived++
		}
		for v := res.FirstVersion; v <= res.LastVersion; v++ {
			wantMark[op.stream][v] = mark
		}
	}
	next := func() s3Op {
		stream := s3Streams[r.IntN(len(s3Streams))]
		return s3Op{stream, s3RandomAppend(r, stream, history[stream])}
	}
	for range 60 {
		switch r.IntN(3) {
		case 0: // alone
			op := next()
			res, err := s.Append(ctx, op.stream, eventstore.Any, op.events...)
			record(op, res, err)
		case 1: // a group of several, on the appends' own road
			release := holdWriter(t, s)
			var base int
			s.w.locked(func() { base = len(s.w.queue) })
			ops := make([]s3Op, 2+r.IntN(5))
			chans := make([]<-chan outcome, len(ops))
			for i := range ops {
				ops[i] = next()
				chans[i] = appendAsync(ctx, s, ops[i].stream, eventstore.Any, ops[i].events...)
				s3Queued(t, s, base+i+1, chans[i])
			}
			if r.IntN(2) == 0 {
				// A job that is not an append: the group runs a
				// savepoint per job (commitEach), not commitAppends.
				require.NoError(t, s.w.submit(noop{}, false))
			}
			release()
			for i, ch := range chans {
				o := <-ch
				record(ops[i], o.res, o.err)
			}
		default: // in a caller's transaction
			ops := make([]s3Op, 1+r.IntN(4))
			type done struct {
				res eventstore.AppendResult
				err error
			}
			results := make([]done, len(ops))
			require.NoError(t, s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
				for i := range ops {
					ops[i] = next()
					res, err := s.AppendTx(ctx, tx, ops[i].stream, eventstore.Any, ops[i].events...)
					results[i] = done{res, err}
				}
				return nil
			}))
			for i := range ops {
				record(ops[i], results[i].res, results[i].err)
			}
		}
	}

	for _, stream := range append(s3Streams, "s3-none") {
		assert.Equal(t, wantMark[stream], map[uint64]int64(nilIfEmpty(s3Marks(t, s, stream))), "derived_id of stream %s", stream)
		for _, cmd := range append(s3Commands, "c-none") {
			want, wantFound := s3OldResult(t, s, stream, cmd)
			got, found, err := s.CommandResult(ctx, stream, cmd)
			require.NoError(t, err)
			assert.Equal(t, wantFound, found, "stream %s command %s", stream, cmd)
			assert.Equal(t, want, got, "stream %s command %s", stream, cmd)
		}
	}
}

// s3Queued waits until n jobs wait in the writer's queue, failing at once
// when the append returned before it was queued.
func s3Queued(t *testing.T, s *Store, n int, ch <-chan outcome) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case o := <-ch:
			t.Fatalf("append %d returned before it was queued: %+v", n, o)
		default:
		}
		var got int
		s.w.locked(func() { got = len(s.w.queue) })
		if got >= n {
			return
		}
		require.True(t, time.Now().Before(deadline), "%d appends queued, want %d", got, n)
		time.Sleep(time.Millisecond)
	}
}

func nilIfEmpty(m map[uint64]int64) map[uint64]int64 {
	if len(m) == 0 {
		return nil
	}
	return m
}

// TestReviewS3BusCommandsAcrossInsertChunks: the bus's commands of sizes
// around the insert's chunk of 16 rows, each followed at once by another
// command of the bus, on the three write roads: every row marked, each
// command found with exactly its own events.
func TestReviewS3BusCommandsAcrossInsertChunks(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	sizes := []int{1, 15, 16, 17, 18, 32, 33, 34, 100}
	want := map[string]eventstore.AppendResult{}
	for _, n := range sizes {
		stream := fmt.Sprint("alone-", n)
		for i, cmd := range []string{"a", "b"} {
			res, err := s.Append(ctx, stream, eventstore.Any, s3Named(stream, cmd, 0, n+i)...)
			require.NoError(t, err)
			want[stream+"/"+cmd] = res
		}
	}
	release := holdWriter(t, s)
	var chans []<-chan outcome
	var keys []string
	for _, n := range sizes {
		stream := fmt.Sprint("group-", n)
		for i, cmd := range []string{"a", "b"} {
			chans = append(chans, appendAsync(ctx, s, stream, eventstore.Any, s3Named(stream, cmd, 0, n+i)...))
			keys = append(keys, stream+"/"+cmd)
			queued(t, s, len(chans))
		}
	}
	release()
	for i, ch := range chans {
		o := <-ch
		require.NoError(t, o.err)
		want[keys[i]] = o.res
	}
	require.NoError(t, s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for _, n := range sizes {
			stream := fmt.Sprint("tx-", n)
			for i, cmd := range []string{"a", "b"} {
				res, err := s.AppendTx(ctx, tx, stream, eventstore.Any, s3Named(stream, cmd, 0, n+i)...)
				if err != nil {
					return err
				}
				want[stream+"/"+cmd] = res
			}
		}
		return nil
	}))
	var unmarked int
	require.NoError(t, s.readers.QueryRow(`SELECT count(*) FROM cairn_events WHERE derived_id <> 1`).Scan(&unmarked))
	assert.Zero(t, unmarked, "every event of the bus is marked")
	assert.Empty(t, indexedCommands(t, s))
	for key, w := range want {
		stream, cmd, _ := strings.Cut(key, "/")
		got, found, err := s.CommandResult(ctx, stream, cmd)
		require.NoError(t, err)
		require.True(t, found, key)
		w.Duplicate = true
		assert.Equal(t, w, got, key)
	}
}

// TestReviewS3LongNames: the longest stream name and a long command ID
// (CommandEventID outgrows its stack buffer): the bus's command is marked
// and found, and a redelivery is absorbed.
func TestReviewS3LongNames(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	stream := strings.Repeat("s", storekit.MaxStreamLen)
	cmd := strings.Repeat("é", 400)
	evs := s3Named(stream, cmd, 0, 3)
	res, err := s.Append(ctx, stream, eventstore.NoStream, evs...)
	require.NoError(t, err)
	assert.Equal(t, map[uint64]int64{0: 1, 1: 1, 2: 1}, s3Marks(t, s, stream))
	got, found, err := s.CommandResult(ctx, stream, cmd)
	require.NoError(t, err)
	require.True(t, found)
	res.Duplicate = true
	assert.Equal(t, res, got)
	again, err := s.Append(ctx, stream, eventstore.NoStream, s3Named(stream, cmd, 0, 3)...)
	require.NoError(t, err)
	assert.Equal(t, res, again)
	_, found, err = s.CommandResult(ctx, stream, cmd[:len(cmd)-2])
	require.NoError(t, err)
	assert.False(t, found, "a prefix of the command ID is another command")
}

// TestReviewS3CommandResultOnClosedStore: a closed store refuses the
// lookup with ErrClosed, a canceled context with its error.
func TestReviewS3CommandResultOnClosedStore(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, t.TempDir()+"/events.db", Options{})
	require.NoError(t, err)
	_, err = s.Append(ctx, "order-1", eventstore.NoStream, s3Named("order-1", "c1", 0, 2)...)
	require.NoError(t, err)
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, found, err := s.CommandResult(canceled, "order-1", "c1")
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, found)
	require.NoError(t, s.Close())
	_, found, err = s.CommandResult(ctx, "order-1", "c1")
	require.ErrorIs(t, err, eventstore.ErrClosed)
	assert.False(t, found)
}

// sqlS3CommandResultV5 is CommandResult's statement in the release before
// schema step 6 (a4787db), which a process of that release runs on every
// lookup.
const sqlS3CommandResultV5 = `SELECT min(version), max(version), max(position)
	FROM cairn_events INDEXED BY cairn_events_command WHERE stream = ? AND command_id = ?`

// TestReviewS3OlderProcessAfterStep6: a process of the release before,
// running when this release migrates the file, keeps its own statement,
// which names the rebuilt index; that index no longer qualifies for it.
// docs/sqlite.md says to stop older processes first; should one run on,
// its lookups fail with an error, never with a wrong answer.
func TestReviewS3OlderProcessAfterStep6(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "events.db")
	old := createAtVersion(t, path, 5) // the older process's connection
	defer old.Close()
	insertAsReleased(t, old, "order-1", 0, storekit.CommandEventID("order-1", "c1", 0), "c1")
	lookup := func(cmd string) (sql.NullInt64, error) {
		var first, last, pos sql.NullInt64
		err := old.QueryRowContext(ctx, sqlS3CommandResultV5, "order-1", cmd).Scan(&first, &last, &pos)
		return first, err
	}
	first, err := lookup("c1")
	require.NoError(t, err, "before the migration")
	require.True(t, first.Valid)

	s, err := Open(ctx, path, Options{}) // this release: migrates to step 6
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Append(ctx, "order-1", eventstore.Exact(0), s3Named("order-1", "c2", 0, 1)...)
	require.NoError(t, err)

	for _, cmd := range []string{"c1", "c2"} {
		_, err := lookup(cmd)
		assert.ErrorContains(t, err, "no query solution", "the older process looks up %s after the migration", cmd)
	}
}

// TestReviewS3MigratedFileAnswersAsBefore: a version-5 file holding random
// mixes of the bus's and other commands' events, as that release wrote
// them (no mark), is opened by this release; then random appends follow,
// some of them repeats of the old ones or continuing old commands. Every
// command of every stream is found as the old statement finds it.
func TestReviewS3MigratedFileAnswersAsBefore(t *testing.T) {
	race.Outside(t)
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "events.db")
			db := createAtVersion(t, path, 5)
			r := rand.New(rand.NewPCG(seed, 99))
			history := map[string][][]eventstore.EventData{}
			wantMark := map[string]map[uint64]int64{}
			held := map[string]map[[16]byte]bool{}
			for range 40 {
				stream := s3Streams[r.IntN(len(s3Streams))]
				evs := s3RandomAppend(r, stream, history[stream])
				if held[stream] == nil {
					held[stream] = map[[16]byte]bool{}
					wantMark[stream] = map[uint64]int64{}
				}
				clash := false
				for _, e := range evs {
					clash = clash || held[stream][e.ID]
				}
				if clash {
					continue // that release refused it, or wrote nothing
				}
				for _, e := range evs {
					v := uint64(len(wantMark[stream]))
					insertAsReleased(t, db, stream, int(v), e.ID, e.Metadata.CommandID)
					held[stream][e.ID] = true
					wantMark[stream][v] = 0
				}
				history[stream] = append(history[stream], evs)
			}
			require.NoError(t, db.Close())
			s, err := Open(ctx, path, Options{})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, s.Close()) })
			s3RunModel(t, s, seed, history, wantMark)
		})
	}
}

// TestReviewS3CommandResultRacesClose: lookups of a bus command (both
// statements) racing Close either answer right or fail with ErrClosed.
func TestReviewS3CommandResultRacesClose(t *testing.T) {
	ctx := context.Background()
	for round := range 20 {
		s, err := Open(ctx, filepath.Join(t.TempDir(), "events.db"), Options{})
		require.NoError(t, err)
		res, err := s.Append(ctx, "order-1", eventstore.NoStream, s3Named("order-1", "c1", 0, 40)...)
		require.NoError(t, err)
		res.Duplicate = true
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for {
					got, found, err := s.CommandResult(ctx, "order-1", "c1")
					if err != nil {
						assert.ErrorIs(t, err, eventstore.ErrClosed, "round %d", round)
						return
					}
					assert.True(t, found)
					assert.Equal(t, res, got)
				}
			})
		}
		time.Sleep(time.Duration(round) * time.Millisecond)
		require.NoError(t, s.Close())
		wg.Wait()
	}
}
