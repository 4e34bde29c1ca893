package postgres_test

// Review S12 (commit 23d4d71): Append checks Exact(v) of one event by one
// probe of the event at v and NoStream by no read at all, leaning on the
// unique index on (stream, version); the parameters of every append
// statement were renumbered. These tests attack the store's promises
// through its public API: contiguous versions, typed refusals that write
// nothing and name the actual version, duplicates that write nothing,
// all-or-nothing multi-event appends, one winner per version under races
// (review_s12_races_test.go), global positions in version order, in every
// pgx query mode. The review found that refusals then wrote and logged on
// the server (review_s12_refusal_test.go).

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// s12Modes are pgx's query modes the store must work in: "default" is the
// connection string's own (cache_statement).
var s12Modes = []string{"default", "exec", "simple_protocol"}

// s12AllModes adds pgx's other modes, for the tests that are cheap.
var s12AllModes = append(s12Modes, "cache_describe", "describe_exec")

func s12URL(mode string, pool int) string {
	url := server.URL
	if mode != "default" {
		url = withParam(url, "default_query_exec_mode", mode)
	}
	if pool > 0 {
		url = withPoolSize(url, pool)
	}
	return url
}

func s12Store(t testing.TB, mode string, pool int) *postgres.Store {
	t.Helper()
	return newStoreAt(t, s12URL(mode, pool), postgres.Options{})
}

func s12Ev(typ string) eventstore.EventData {
	return eventstore.EventData{ID: eventstore.NewEventID(), Type: typ, SchemaVersion: 1, Data: []byte(`{"t":"` + typ + `"}`)}
}

func s12Evs(typ string, n int) []eventstore.EventData {
	out := make([]eventstore.EventData, n)
	for i := range out {
		out[i] = s12Ev(fmt.Sprintf("%s-%d", typ, i))
	}
	return out
}

func s12Read(t testing.TB, s eventstore.Store, stream string) []eventstore.Event {
	t.Helper()
	var out []eventstore.Event
	for e, err := range s.ReadStream(context.Background(), stream, eventstore.Forward(0)) {
		require.NoError(t, err)
		out = append(out, e)
	}
	return out
}

// s12Contiguous checks versions 0..n-1, each once, no event ID twice, and
// global positions strictly increasing with the version.
func s12Contiguous(t testing.TB, stream string, evs []eventstore.Event) {
	t.Helper()
	ids := make(map[uuid.UUID]uint64, len(evs))
	for i, e := range evs {
		require.Equal(t, uint64(i), e.Version, "stream %q: event %d has version %d (gap or repeat)", stream, i, e.Version)
		prev, dup := ids[e.ID]
		require.False(t, dup, "stream %q: event ID %s at versions %d and %d", stream, e.ID, prev, e.Version)
		ids[e.ID] = e.Version
		if i > 0 {
			require.True(t, evs[i-1].Position.Before(e.Position),
				"stream %q: version %d at %s does not come before version %d at %s", stream, i-1, evs[i-1].Position, i, e.Position)
		}
	}
}

func s12IDs(evs []eventstore.Event) []uuid.UUID {
	out := make([]uuid.UUID, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

func s12DataIDs(evs []eventstore.EventData) []uuid.UUID {
	out := make([]uuid.UUID, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

func s12RequireWrongVersion(t testing.TB, err error, stream string, expected, actual eventstore.ExpectedVersion, msgAndArgs ...any) {
	t.Helper()
	require.Error(t, err, msgAndArgs...)
	var wv *eventstore.WrongVersionError
	require.ErrorAs(t, err, &wv, append([]any{"want *WrongVersionError, got %T: %v", err, err}, msgAndArgs...)...)
	require.ErrorIs(t, err, eventstore.ErrWrongVersion)
	assert.Equal(t, stream, wv.Stream, msgAndArgs...)
	assert.Equal(t, expected, wv.Expected, msgAndArgs...)
	assert.Equal(t, actual, wv.Actual, msgAndArgs...)
}

// The refusals of every expected-version kind, at every distance from the
// stream's end, with one event and with several, then repeats and
// partial repeats, in each query mode; the stream is checked after each
// refusal to hold exactly what was accepted.
func TestReviewS12EdgesInEveryMode(t *testing.T) {
	for _, mode := range s12AllModes {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			s := s12Store(t, mode, 0)
			const stream = "edge-1"
			want := []uuid.UUID{} // what the stream must hold
			holds := func(msg string) {
				t.Helper()
				got := s12Read(t, s, stream)
				s12Contiguous(t, stream, got)
				require.Equal(t, want, s12IDs(got), "%s: the stream holds other events than those accepted", msg)
			}
			beyond := []uint64{0, 1, 5, math.MaxInt64 - 1, math.MaxInt64, math.MaxInt64 + 1, math.MaxUint64 - 1, math.MaxUint64}
			// An absent stream: every Exact and StreamExists is refused.
			for _, v := range beyond {
				for _, n := range []int{1, 3} {
					_, err := s.Append(ctx, stream, eventstore.Exact(v), s12Evs("x", n)...)
					s12RequireWrongVersion(t, err, stream, eventstore.Exact(v), eventstore.NoStream, "Exact(%d), %d events, absent stream", v, n)
				}
			}
			for _, n := range []int{1, 3} {
				_, err := s.Append(ctx, stream, eventstore.StreamExists, s12Evs("x", n)...)
				s12RequireWrongVersion(t, err, stream, eventstore.StreamExists, eventstore.NoStream)
			}
			holds("absent stream")

			// NoStream creates it with 3 events.
			first := s12Evs("first", 3)
			r0, err := s.Append(ctx, stream, eventstore.NoStream, first...)
			require.NoError(t, err)
			require.Equal(t, eventstore.AppendResult{FirstVersion: 0, LastVersion: 2, Position: r0.Position}, r0)
			want = append(want, s12DataIDs(first)...)
			holds("created")

			// NoStream again, with new IDs: refused.
			for _, n := range []int{1, 2, 3, 4, 10} {
				_, err := s.Append(ctx, stream, eventstore.NoStream, s12Evs("x", n)...)
				s12RequireWrongVersion(t, err, stream, eventstore.NoStream, eventstore.Exact(2), "NoStream, %d events", n)
			}
			holds("NoStream on an existing stream")

			// Exact behind the end (the insert collides) and beyond it (no
			// event at v).
			for _, v := range append([]uint64{0, 1, 3, 4, 100}, beyond[3:]...) {
				for _, n := range []int{1, 2, 3, 5} {
					_, err := s.Append(ctx, stream, eventstore.Exact(v), s12Evs("x", n)...)
					s12RequireWrongVersion(t, err, stream, eventstore.Exact(v), eventstore.Exact(2), "Exact(%d), %d events, stream at 2", v, n)
				}
			}
			holds("Exact off the end")

			// The right Exact: one event, then four.
			one := s12Ev("one")
			r1, err := s.Append(ctx, stream, eventstore.Exact(2), one)
			require.NoError(t, err)
			require.Equal(t, uint64(3), r1.FirstVersion)
			require.Equal(t, uint64(3), r1.LastVersion)
			require.False(t, r1.Duplicate)
			want = append(want, one.ID)
			four := s12Evs("four", 4)
			r2, err := s.Append(ctx, stream, eventstore.Exact(3), four...)
			require.NoError(t, err)
			require.Equal(t, uint64(4), r2.FirstVersion)
			require.Equal(t, uint64(7), r2.LastVersion)
			want = append(want, s12DataIDs(four)...)
			holds("exact appends")

			// Exact(0..6) now collide at every version behind the end.
			for v := range uint64(7) {
				_, err := s.Append(ctx, stream, eventstore.Exact(v), s12Evs("x", 2)...)
				s12RequireWrongVersion(t, err, stream, eventstore.Exact(v), eventstore.Exact(7), "Exact(%d), stream at 7", v)
			}
			holds("Exact behind the end")

			// Repeats at their place are duplicates with the earlier result.
			for _, c := range []struct {
				name     string
				expected eventstore.ExpectedVersion
				events   []eventstore.EventData
				r        eventstore.AppendResult
			}{
				{"first, NoStream", eventstore.NoStream, first, r0},
				{"first, Any", eventstore.Any, first, r0},
				{"one, Exact(2)", eventstore.Exact(2), []eventstore.EventData{one}, r1},
				{"one, StreamExists", eventstore.StreamExists, []eventstore.EventData{one}, r1},
				{"four, Exact(3)", eventstore.Exact(3), four, r2},
				{"four, Any", eventstore.Any, four, r2},
			} {
				r, err := s.Append(ctx, stream, c.expected, c.events...)
				require.NoError(t, err, c.name)
				want := c.r
				want.Duplicate = true
				require.Equal(t, want, r, c.name)
			}
			holds("repeats")

			// The same events at another place: displaced conflicts.
			for _, c := range []struct {
				name     string
				expected eventstore.ExpectedVersion
				events   []eventstore.EventData
				stored   uint64
			}{
				{"first, Exact(7)", eventstore.Exact(7), first, 0},
				{"first, Exact(0)", eventstore.Exact(0), first, 0},
				{"first, Exact(2)", eventstore.Exact(2), first, 0},
				{"first, StreamExists", eventstore.StreamExists, first, 0},
				{"one, NoStream", eventstore.NoStream, []eventstore.EventData{one}, 3},
				{"one, Exact(7)", eventstore.Exact(7), []eventstore.EventData{one}, 3},
				{"one, Exact(3)", eventstore.Exact(3), []eventstore.EventData{one}, 3},
				{"one, Exact(1)", eventstore.Exact(1), []eventstore.EventData{one}, 3},
				{"four, NoStream", eventstore.NoStream, four, 4},
				{"four, Exact(7)", eventstore.Exact(7), four, 4},
				{"four, Exact(100)", eventstore.Exact(100), four, 4},
				{"four, Exact(MaxInt64)", eventstore.Exact(math.MaxInt64), four, 4},
			} {
				_, err := s.Append(ctx, stream, c.expected, c.events...)
				var conflict *eventstore.EventIDConflictError
				require.ErrorAs(t, err, &conflict, "%s: want a displaced *EventIDConflictError, got %v", c.name, err)
				assert.True(t, conflict.Displaced, c.name)
				assert.Equal(t, c.stored, conflict.StoredVersion, c.name)
				assert.Equal(t, stream, conflict.Stream, c.name)
			}
			holds("displaced repeats")

			// Partial repeats: an ID stored elsewhere in the stream, with
			// an expected version that matches (the insert's ID collides)
			// and with ones that do not.
			for _, c := range []struct {
				name     string
				expected eventstore.ExpectedVersion
				events   []eventstore.EventData
				index    int
				stored   uint64
			}{
				{"stored first, Exact(7)", eventstore.Exact(7), []eventstore.EventData{first[1], s12Ev("new")}, 0, 1},
				{"stored last, Exact(7)", eventstore.Exact(7), []eventstore.EventData{s12Ev("new"), s12Ev("new"), four[3]}, 2, 7},
				{"stored single, Exact(7)", eventstore.Exact(7), []eventstore.EventData{s12Ev("new"), one}, 1, 3},
				{"stored, NoStream", eventstore.NoStream, []eventstore.EventData{first[0], s12Ev("new")}, 0, 0},
				{"stored, Exact(2)", eventstore.Exact(2), []eventstore.EventData{one, s12Ev("new")}, 0, 3},
				{"stored, Exact(3)", eventstore.Exact(3), []eventstore.EventData{four[0], four[1], s12Ev("new")}, 0, 4},
				{"reordered, Exact(3)", eventstore.Exact(3), []eventstore.EventData{four[1], four[0], four[2], four[3]}, 0, 5},
			} {
				_, err := s.Append(ctx, stream, c.expected, c.events...)
				var conflict *eventstore.EventIDConflictError
				require.ErrorAs(t, err, &conflict, "%s: want *EventIDConflictError, got %v", c.name, err)
				assert.False(t, conflict.Displaced, c.name)
				assert.Equal(t, c.index, conflict.Index, c.name)
				assert.Equal(t, c.events[c.index].ID, conflict.EventID, c.name)
				assert.Equal(t, c.stored, conflict.StoredVersion, c.name)
			}
			holds("partial repeats")

			// A fresh stream by NoStream with one event, and a single Exact
			// beyond its end.
			r3, err := s.Append(ctx, "edge-2", eventstore.NoStream, s12Ev("solo"))
			require.NoError(t, err)
			require.Equal(t, uint64(0), r3.FirstVersion)
			_, err = s.Append(ctx, "edge-2", eventstore.Exact(1), s12Ev("x"))
			s12RequireWrongVersion(t, err, "edge-2", eventstore.Exact(1), eventstore.Exact(0))
			_, err = s.Append(ctx, "edge-2", eventstore.NoStream, s12Ev("x"))
			s12RequireWrongVersion(t, err, "edge-2", eventstore.NoStream, eventstore.Exact(0))
			require.Len(t, s12Read(t, s, "edge-2"), 1)

			// Nothing of the refusals leaked into the log.
			n := 0
			for _, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
				require.NoError(t, err)
				n++
			}
			require.Equal(t, len(want)+1, n, "the log holds events the refusals wrote")
		})
	}
}

// Every field of an event, and the command-derived flag, go to their
// columns through every statement (new, exact, last, AppendTx's, the
// group's), one event and many, in each query mode: the parameters were
// renumbered.
func TestReviewS12FieldsThroughEveryStatement(t *testing.T) {
	for _, mode := range s12AllModes {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			s := s12Store(t, mode, 24)
			k := 0
			mk := func(stream string, n int, derived bool) []eventstore.EventData {
				out := make([]eventstore.EventData, n)
				cmd := fmt.Sprintf("cmd-%d", k)
				for i := range out {
					k++
					out[i] = eventstore.EventData{
						ID:            eventstore.NewEventID(),
						Type:          fmt.Sprintf("type-%d", k),
						SchemaVersion: uint32(k + 1),
						Data:          []byte(fmt.Sprintf(`{"k":%d}`, k)),
						Metadata: eventstore.Metadata{
							CorrelationID: fmt.Sprintf("corr-%d", k),
							CausationID:   fmt.Sprintf("caus-%d", k),
							CommandID:     fmt.Sprintf("cmdx-%d", k),
							Extra:         map[string]string{"k": fmt.Sprint(k), "s": stream},
						},
					}
					if derived {
						out[i].Metadata.CommandID = cmd
						out[i].ID = storekit.CommandEventID(stream, cmd, i)
					}
					if k%3 == 0 {
						out[i].Metadata.Extra = nil
					}
				}
				return out
			}
			type appended struct {
				stream  string
				events  []eventstore.EventData
				derived bool
			}
			var all []appended
			var mu sync.Mutex
			add := func(stream string, evs []eventstore.EventData, derived bool) {
				mu.Lock()
				all = append(all, appended{stream, evs, derived})
				mu.Unlock()
			}
			for _, n := range []int{1, 3} {
				for _, derived := range []bool{false, true} {
					stream := fmt.Sprintf("f-%d-%t", n, derived)
					// checkNew
					evs := mk(stream, n, derived)
					_, err := s.Append(ctx, stream, eventstore.NoStream, evs...)
					require.NoError(t, err)
					add(stream, evs, derived)
					// checkExact
					evs = mk(stream, n, derived)
					_, err = s.Append(ctx, stream, eventstore.Exact(uint64(n-1)), evs...)
					require.NoError(t, err)
					add(stream, evs, derived)
					// checkLast
					evs = mk(stream, n, derived)
					_, err = s.Append(ctx, stream, eventstore.StreamExists, evs...)
					require.NoError(t, err)
					add(stream, evs, derived)
					evs = mk(stream, n, derived)
					_, err = s.Append(ctx, stream, eventstore.Any, evs...)
					require.NoError(t, err)
					add(stream, evs, derived)
					// AppendTx, by each kind
					for _, exp := range []eventstore.ExpectedVersion{eventstore.Exact(uint64(4*n - 1)), eventstore.Any, eventstore.StreamExists} {
						evs = mk(stream, n, derived)
						err = s.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
							_, err := s.AppendTx(ctx, tx, stream, exp, evs...)
							return err
						})
						require.NoError(t, err, "AppendTx %s", exp)
						add(stream, evs, derived)
					}
					txNew := stream + "-tx"
					evs = mk(txNew, n, derived)
					err = s.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
						_, err := s.AppendTx(ctx, tx, txNew, eventstore.NoStream, evs...)
						return err
					})
					require.NoError(t, err)
					add(txNew, evs, derived)
				}
			}
			// Groups: 16 goroutines of single-event appends of each kind at once.
			var wg sync.WaitGroup
			errs := make(chan error, 16*8)
			for g := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					stream := fmt.Sprintf("fg-%d", g)
					derived := g%2 == 0
					for i := range 8 {
						mu.Lock()
						evs := mk(stream, 1, derived)
						mu.Unlock()
						exp := eventstore.Exact(uint64(i - 1))
						switch {
						case i == 0:
							exp = eventstore.NoStream
						case i%3 == 1:
							exp = eventstore.Any
						case i%3 == 2:
							exp = eventstore.StreamExists
						}
						if _, err := s.Append(ctx, stream, exp, evs...); err != nil {
							errs <- fmt.Errorf("%s %d %s: %w", stream, i, exp, err)
							return
						}
						add(stream, evs, derived)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}

			// Every event reads back as written.
			byID := map[uuid.UUID]eventstore.Event{}
			streams := map[string]bool{}
			for _, a := range all {
				streams[a.stream] = true
			}
			for stream := range streams {
				evs := s12Read(t, s, stream)
				s12Contiguous(t, stream, evs)
				for _, e := range evs {
					byID[e.ID] = e
				}
			}
			derivedOf := map[uuid.UUID]bool{}
			rows, err := s.Pool().Query(ctx, `SELECT event_id, derived_id FROM `+pgx.Identifier{s.Schema(), "events"}.Sanitize())
			require.NoError(t, err)
			for rows.Next() {
				var id uuid.UUID
				var d bool
				require.NoError(t, rows.Scan(&id, &d))
				derivedOf[id] = d
			}
			require.NoError(t, rows.Err())
			total := 0
			for _, a := range all {
				for i, w := range a.events {
					total++
					got, ok := byID[w.ID]
					require.True(t, ok, "%s: event %d missing", a.stream, i)
					assert.Equal(t, a.stream, got.StreamID)
					assert.Equal(t, w.Type, got.Type)
					assert.Equal(t, w.SchemaVersion, got.SchemaVersion)
					assert.JSONEq(t, string(w.Data), string(got.Data))
					assert.Equal(t, w.Metadata.CorrelationID, got.Metadata.CorrelationID)
					assert.Equal(t, w.Metadata.CausationID, got.Metadata.CausationID)
					assert.Equal(t, w.Metadata.CommandID, got.Metadata.CommandID)
					if len(w.Metadata.Extra) == 0 {
						assert.Empty(t, got.Metadata.Extra)
					} else {
						assert.Equal(t, w.Metadata.Extra, got.Metadata.Extra)
					}
					assert.Equal(t, a.derived, derivedOf[w.ID], "%s event %d: derived_id", a.stream, i)
				}
			}
			require.Len(t, byID, total)
		})
	}
}
