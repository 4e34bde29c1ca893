package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// Review (S3) of the command index without the command bus's appends
// (derived_id, schema step 6): CommandResult must answer as the release
// before did, for every mix of events, on every write path, across the
// pages it reads a bus command in (17 events).

// s3Named returns n events of command cmd named as the bus names them for
// stream named, from index from on.
func s3Named(named, cmd string, from, n int) []eventstore.EventData {
	evs := make([]eventstore.EventData, n)
	for i := range evs {
		evs[i] = eventstore.EventData{ID: storekit.CommandEventID(named, cmd, from+i), Type: "t", SchemaVersion: 1,
			Data: []byte("{}"), Metadata: eventstore.Metadata{CommandID: cmd}}
	}
	return evs
}

// s3Plain returns n events of command cmd with IDs of their own.
func s3Plain(cmd string, n int) []eventstore.EventData {
	evs := make([]eventstore.EventData, n)
	for i := range evs {
		evs[i] = eventstore.EventData{ID: eventstore.NewEventID(), Type: "t", SchemaVersion: 1, Data: []byte("{}"),
			Metadata: eventstore.Metadata{CommandID: cmd}}
	}
	return evs
}

// s3OldResult is the answer of the release before schema step 6, without
// its index: every event of the stream that records the command; the
// position of the last.
func s3OldResult(t *testing.T, s *postgres.Store, stream, cmd string) (eventstore.AppendResult, bool) {
	t.Helper()
	var first, last, seq int64
	var txID uint64
	err := s.Pool().QueryRow(context.Background(), `SELECT min(version) OVER (), version, tx_id, seq FROM `+
		pgx.Identifier{s.Schema(), "events"}.Sanitize()+` WHERE stream = $1 AND command_id = $2 AND $2 <> ''
		ORDER BY version DESC LIMIT 1`, stream, cmd).Scan(&first, &last, &txID, &seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return eventstore.AppendResult{}, false
	}
	require.NoError(t, err)
	return eventstore.AppendResult{FirstVersion: uint64(first), LastVersion: uint64(last),
		Position: eventstore.Position{Major: txID, Minor: uint64(seq)}, Duplicate: true}, true
}

// s3Marks returns derived_id of the stream's events, by version.
func s3Marks(t *testing.T, s *postgres.Store, stream string) map[uint64]bool {
	t.Helper()
	rows, err := s.Pool().Query(context.Background(), `SELECT version, derived_id FROM `+
		pgx.Identifier{s.Schema(), "events"}.Sanitize()+` WHERE stream = $1`, stream)
	require.NoError(t, err)
	out := map[uint64]bool{}
	var v int64
	var d bool
	_, err = pgx.ForEachRow(rows, []any{&v, &d}, func() error { out[uint64(v)] = d; return nil })
	require.NoError(t, err)
	if len(out) == 0 {
		return nil
	}
	return out
}

var (
	s3Streams  = []string{"s3-a", "s3-b", "s3-c"}
	s3Commands = []string{"c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7"}
	s3Sizes    = []int{1, 1, 1, 2, 3, 16, 17, 18, 34, 35}
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
		return s3Plain("", n)
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
// other commands' events, alone, concurrently (single events form groups,
// group.go) and with AppendTx, and checks that CommandResult answers for
// every stream and command as the statement of the release before does
// (without its index), and that derived_id marks exactly the appends that
// storekit.CommandIDsDerived recognizes.
func TestReviewS3CommandResultAsBefore(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			s3RunModel(t, newStore(t, postgres.Options{}), seed, map[string][][]eventstore.EventData{}, map[string]map[uint64]bool{})
		})
	}
}

// s3RunModel appends at random to s, whose streams already hold the
// appends of history, with the marks of wantMark, then checks every
// command of every stream.
func s3RunModel(t *testing.T, s *postgres.Store, seed uint64, history map[string][][]eventstore.EventData, wantMark map[string]map[uint64]bool) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(seed, 11))
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
			wantMark[op.stream] = map[uint64]bool{}
		}
		mark := storekit.CommandIDsDerived(op.stream, op.events)
		if mark {
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
	for range 50 {
		switch r.IntN(3) {
		case 0: // alone
			op := next()
			res, err := s.Append(ctx, op.stream, eventstore.Any, op.events...)
			record(op, res, err)
		case 1: // at once: single events may share a group's transaction
			ops := make([]s3Op, 2+r.IntN(8))
			type done struct {
				res eventstore.AppendResult
				err error
			}
			results := make([]done, len(ops))
			for i := range ops {
				ops[i] = next()
				if r.IntN(4) > 0 {
					ops[i].events = ops[i].events[:1]
				}
			}
			var wg sync.WaitGroup
			for i := range ops {
				wg.Go(func() {
					res, err := s.Append(ctx, ops[i].stream, eventstore.Any, ops[i].events...)
					results[i] = done{res, err}
				})
			}
			wg.Wait()
			for i := range ops {
				record(ops[i], results[i].res, results[i].err)
			}
		default: // in a caller's transaction
			ops := make([]s3Op, 1+r.IntN(4))
			type done struct {
				res eventstore.AppendResult
				err error
			}
			results := make([]done, len(ops))
			require.NoError(t, pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
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
		want := wantMark[stream]
		if len(want) == 0 {
			want = nil
		}
		assert.Equal(t, want, s3Marks(t, s, stream), "derived_id of stream %s", stream)
		for _, cmd := range append(s3Commands, "c-none") {
			want, wantFound := s3OldResult(t, s, stream, cmd)
			got, found, err := s.CommandResult(ctx, stream, cmd)
			require.NoError(t, err)
			assert.Equal(t, wantFound, found, "stream %s command %s", stream, cmd)
			assert.Equal(t, want, got, "stream %s command %s", stream, cmd)
		}
	}
}

// TestReviewS3BusCommandsAcrossPages: the bus's commands of sizes around
// the page of 17 events that CommandResult once read (it finds a command's
// end in one statement now), each followed at once by
// another command of the bus, by the same command's events appended apart,
// or by nothing; alone and with AppendTx. Each command is found with
// exactly its events.
func TestReviewS3BusCommandsAcrossPages(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, postgres.Options{})
	sizes := []int{1, 15, 16, 17, 18, 33, 34, 35, 51, 52, 100}
	type want struct {
		stream, cmd string
		r           eventstore.AppendResult
	}
	var wants []want
	appendTo := func(appendFn func(stream string, evs ...eventstore.EventData) (eventstore.AppendResult, error), prefix string) {
		for _, n := range sizes {
			// Followed by another command of the bus.
			stream := fmt.Sprint(prefix, "next-", n)
			a, err := appendFn(stream, s3Named(stream, "a", 0, n)...)
			require.NoError(t, err)
			b, err := appendFn(stream, s3Named(stream, "b", 0, n)...)
			require.NoError(t, err)
			wants = append(wants, want{stream, "a", a}, want{stream, "b", b})
			// Followed by the same command's next events, appended apart
			// (named on by the bus's rule, or with IDs of their own).
			stream = fmt.Sprint(prefix, "apart-", n)
			a, err = appendFn(stream, s3Named(stream, "a", 0, n)...)
			require.NoError(t, err)
			more, err := appendFn(stream, s3Named(stream, "a", n, 2)...)
			require.NoError(t, err)
			own, err := appendFn(stream, s3Plain("a", 1)...)
			require.NoError(t, err)
			wants = append(wants, want{stream, "a", eventstore.AppendResult{FirstVersion: a.FirstVersion,
				LastVersion: own.LastVersion, Position: own.Position}})
			_ = more
			// Alone in its stream.
			stream = fmt.Sprint(prefix, "alone-", n)
			a, err = appendFn(stream, s3Named(stream, "a", 0, n)...)
			require.NoError(t, err)
			wants = append(wants, want{stream, "a", a})
		}
	}
	appendTo(func(stream string, evs ...eventstore.EventData) (eventstore.AppendResult, error) {
		return s.Append(ctx, stream, eventstore.Any, evs...)
	}, "plain-")
	appendTo(func(stream string, evs ...eventstore.EventData) (r eventstore.AppendResult, err error) {
		err = pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
			r, err = s.AppendTx(ctx, tx, stream, eventstore.Any, evs...)
			return err
		})
		return r, err
	}, "tx-")
	for _, w := range wants {
		got, found, err := s.CommandResult(ctx, w.stream, w.cmd)
		require.NoError(t, err)
		require.True(t, found, "%s %s", w.stream, w.cmd)
		w.r.Duplicate = true
		assert.Equal(t, w.r, got, "%s %s", w.stream, w.cmd)
		old, _ := s3OldResult(t, s, w.stream, w.cmd)
		assert.Equal(t, old, got, "%s %s: as before", w.stream, w.cmd)
	}
}

// TestReviewS3GroupedAppendsAreMarked: concurrent single-event appends of
// the bus, of a caller's command and without command, which the store
// groups: each row carries its own append's mark.
func TestReviewS3GroupedAppendsAreMarked(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, postgres.Options{})
	const n = 96
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			stream := fmt.Sprint("g-", i)
			var evs []eventstore.EventData
			switch i % 3 {
			case 0:
				evs = s3Named(stream, "c", 0, 1)
			case 1:
				evs = s3Plain("c", 1)
			default:
				evs = s3Plain("", 1)
			}
			_, err := s.Append(ctx, stream, eventstore.NoStream, evs...)
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	for i := range n {
		stream := fmt.Sprint("g-", i)
		assert.Equal(t, map[uint64]bool{0: i%3 == 0}, s3Marks(t, s, stream), stream)
		_, found, err := s.CommandResult(ctx, stream, "c")
		require.NoError(t, err)
		assert.Equal(t, i%3 != 2, found, stream)
	}
}

// TestReviewS3LongNames: the longest stream name and a long command ID
// (CommandEventID outgrows its stack buffer), over more than a page.
func TestReviewS3LongNames(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, postgres.Options{})
	stream := strings.Repeat("s", storekit.MaxStreamLen)
	cmd := strings.Repeat("é", 400)
	res, err := s.Append(ctx, stream, eventstore.NoStream, s3Named(stream, cmd, 0, 20)...)
	require.NoError(t, err)
	got, found, err := s.CommandResult(ctx, stream, cmd)
	require.NoError(t, err)
	require.True(t, found)
	res.Duplicate = true
	assert.Equal(t, res, got)
	again, err := s.Append(ctx, stream, eventstore.NoStream, s3Named(stream, cmd, 0, 20)...)
	require.NoError(t, err)
	assert.Equal(t, res, again)
}

// s3Trips counts the round trips of a pool (queries and batches) made
// for a context that carries s3Counted: the store's own workers (the
// NOTIFY that an append's wake-up sends) use the pool too, at their time.
type s3Trips struct{ n atomic.Int64 }

type s3Counted struct{}

func (c *s3Trips) count(ctx context.Context) {
	if ctx.Value(s3Counted{}) != nil {
		c.n.Add(1)
	}
}

func (c *s3Trips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.count(ctx)
	return ctx
}
func (c *s3Trips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *s3Trips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.count(ctx)
	return ctx
}
func (c *s3Trips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *s3Trips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// TestReviewS3CommandResultRoundTrips: docs/aggregates.md ("What a lookup
// costs") promises one round trip for a lookup on PostgreSQL, whatever the
// command's size. The review found 1 + n/17 for a bus command of n events
// (a round trip per page of 17), since mended.
func TestReviewS3CommandResultRoundTrips(t *testing.T) {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(server.URL)
	require.NoError(t, err)
	trips := &s3Trips{}
	cfg.ConnConfig.Tracer = trips
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	schema := server.NewSchema("trips")
	s, err := postgres.New(ctx, pool, postgres.Options{Schema: schema})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close(); dropSchema(t, schema) })
	for _, n := range []int{1, 16, 17, 34, 100} {
		stream := fmt.Sprint("order-", n)
		_, err := s.Append(ctx, stream, eventstore.NoStream, s3Named(stream, "c", 0, n)...)
		require.NoError(t, err)
		_, err = s.Append(ctx, stream, eventstore.Exact(uint64(n-1)), s3Plain("", 1)...)
		require.NoError(t, err)
		before := trips.n.Load()
		_, found, err := s.CommandResult(context.WithValue(ctx, s3Counted{}, true), stream, "c")
		require.NoError(t, err)
		require.True(t, found)
		assert.Equal(t, int64(1), trips.n.Load()-before, "round trips to find a command of %d events", n)
	}
}

// TestReviewS3CommandResultRacesClose: lookups of a bus command of several
// pages racing Close either answer right or fail with ErrClosed.
func TestReviewS3CommandResultRacesClose(t *testing.T) {
	ctx := context.Background()
	for round := range 10 {
		schema := server.NewSchema("s3close")
		s, err := postgres.Open(ctx, server.URL, postgres.Options{Schema: schema})
		require.NoError(t, err)
		res, err := s.Append(ctx, "order-1", eventstore.NoStream, s3Named("order-1", "c1", 0, 60)...)
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
		time.Sleep(time.Duration(5*round) * time.Millisecond)
		require.NoError(t, s.Close())
		wg.Wait()
		dropSchema(t, schema)
	}
}
