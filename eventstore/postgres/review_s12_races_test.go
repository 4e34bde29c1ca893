package postgres_test

// Review S12's races: see review_s12_test.go.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
)

// s12AtOnce runs fn(0) to fn(n-1), each on a goroutine of its own, released
// together so that they race, and returns when all have.
func s12AtOnce(n int, fn func(w int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range n {
		wg.Go(func() {
			<-start
			fn(w)
		})
	}
	close(start)
	wg.Wait()
}

// s12Winner is one successful append of a race.
type s12Winner struct {
	first, last uint64
	ids         []uuid.UUID
	pos         eventstore.Position
}

// s12CheckWinners checks that the winners tile the stream: each holds
// exactly its versions with its IDs, at its position, and no version has
// two.
func s12CheckWinners(t testing.TB, stream string, got []eventstore.Event, winners []s12Winner) {
	t.Helper()
	s12Contiguous(t, stream, got)
	sort.Slice(winners, func(i, j int) bool { return winners[i].first < winners[j].first })
	next := uint64(0)
	for _, w := range winners {
		require.Equal(t, next, w.first, "stream %q: winners do not tile the stream: one starts at %d, %d due", stream, w.first, next)
		require.Equal(t, w.first+uint64(len(w.ids))-1, w.last)
		for i, id := range w.ids {
			require.Equal(t, id, got[w.first+uint64(i)].ID, "stream %q: version %d holds another append's event", stream, w.first+uint64(i))
		}
		require.Equal(t, w.pos, got[w.last].Position, "stream %q: the result's position is not that of its last event", stream)
		next = w.last + 1
	}
	require.Equal(t, uint64(len(got)), next, "stream %q holds events of no winner", stream)
}

// s12Settle checks a race once its workers are done: no worker's error,
// the winners' events and no other in the stream, none of the lost ones.
// It returns the stream.
func s12Settle(t testing.TB, s eventstore.Store, stream string, errs chan error, winners []s12Winner, lost []uuid.UUID) []eventstore.Event {
	t.Helper()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	got := s12Read(t, s, stream)
	s12CheckWinners(t, stream, got, winners)
	in := map[uuid.UUID]bool{}
	for _, e := range got {
		in[e.ID] = true
	}
	for _, id := range lost {
		require.False(t, in[id], "a refused append's event %s is in the stream", id)
	}
	return got
}

// Many goroutines append to one stream with Exact(the version they last
// saw), one event or several: every version has exactly one winner, the
// losers are told the stream's version, always past the one they
// expected, and nothing of theirs is written.
func TestReviewS12ExactRace(t *testing.T) {
	for _, mode := range s12Modes {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			s := s12Store(t, mode, 20)
			const stream, workers, attempts = "race-exact", 16, 25
			var mu sync.Mutex
			var winners []s12Winner
			var lost []uuid.UUID
			errs := make(chan error, workers)
			s12AtOnce(workers, func(w int) {
				exp := eventstore.NoStream
				for a := range attempts {
					n := 1
					if (w+a)%4 == 0 {
						n = 1 + (w+a)%3 + 1
					}
					evs := s12Evs(fmt.Sprintf("w%d", w), n)
					r, err := s.Append(ctx, stream, exp, evs...)
					if err == nil {
						if r.Duplicate {
							errs <- fmt.Errorf("worker %d: fresh IDs reported duplicate: %+v", w, r)
							return
						}
						mu.Lock()
						winners = append(winners, s12Winner{r.FirstVersion, r.LastVersion, s12DataIDs(evs), r.Position})
						mu.Unlock()
						if v, ok := exp.Version(); ok && r.FirstVersion != v+1 || exp.IsNoStream() && r.FirstVersion != 0 {
							errs <- fmt.Errorf("worker %d: expected %s, written from %d", w, exp, r.FirstVersion)
							return
						}
						exp = eventstore.Exact(r.LastVersion)
						continue
					}
					var wv *eventstore.WrongVersionError
					if !errors.As(err, &wv) {
						errs <- fmt.Errorf("worker %d: expected %s: %T %w", w, exp, err, err)
						return
					}
					av, ok := wv.Actual.Version()
					ev, _ := exp.Version()
					switch {
					case wv.Stream != stream || wv.Expected != exp:
						errs <- fmt.Errorf("worker %d: error names %q %s, not %s", w, wv.Stream, wv.Expected, exp)
						return
					case !ok:
						errs <- fmt.Errorf("worker %d: expected %s, told the stream is %s", w, exp, wv.Actual)
						return
					case !exp.IsNoStream() && av <= ev:
						errs <- fmt.Errorf("worker %d: expected %s, refused with actual %s, not past it", w, exp, wv.Actual)
						return
					}
					mu.Lock()
					lost = append(lost, s12DataIDs(evs)...)
					mu.Unlock()
					exp = wv.Actual
				}
			})
			got := s12Settle(t, s, stream, errs, winners, lost)
			t.Logf("%d winners, %d events, %d lost events", len(winners), len(got), len(lost))
		})
	}
}

// Rounds of 12 goroutines creating one stream with NoStream at once, one
// event or two: exactly one wins, the others are told the winner's last
// version.
func TestReviewS12NoStreamRace(t *testing.T) {
	for _, mode := range s12Modes {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			s := s12Store(t, mode, 16)
			const workers, rounds = 12, 20
			for round := range rounds {
				stream := fmt.Sprintf("race-new-%d", round)
				results := make([]eventstore.AppendResult, workers)
				errs := make([]error, workers)
				batches := make([][]eventstore.EventData, workers)
				for w := range workers {
					batches[w] = s12Evs("n", 1+(w+round)%2*(round%3))
				}
				s12AtOnce(workers, func(w int) {
					results[w], errs[w] = s.Append(ctx, stream, eventstore.NoStream, batches[w]...)
				})
				win := -1
				for w := range workers {
					if errs[w] == nil {
						require.Equal(t, -1, win, "round %d: workers %d and %d both created the stream", round, win, w)
						win = w
					}
				}
				require.NotEqual(t, -1, win, "round %d: nobody won: %v", round, errs)
				r := results[win]
				require.False(t, r.Duplicate)
				require.Equal(t, uint64(0), r.FirstVersion)
				for w := range workers {
					if w != win {
						s12RequireWrongVersion(t, errs[w], stream, eventstore.NoStream, eventstore.Exact(r.LastVersion), "round %d worker %d", round, w)
					}
				}
				got := s12Read(t, s, stream)
				s12CheckWinners(t, stream, got, []s12Winner{{r.FirstVersion, r.LastVersion, s12DataIDs(batches[win]), r.Position}})
			}
		})
	}
}

// Rounds in which one batch of events (one or three) is appended by 10
// goroutines at once with the same expected version (NoStream, Exact),
// against 4 rivals with other IDs and the same expectation: either the
// batch wins, and every one of its appends succeeds with one writer and
// the others duplicates of its result, or a rival wins and every batch
// append is a WrongVersionError.
func TestReviewS12SameIDsRace(t *testing.T) {
	for _, mode := range s12Modes {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			s := s12Store(t, mode, 20)
			const same, rivals, rounds = 10, 4, 24
			stream := "race-same"
			exp := eventstore.NoStream
			var winners []s12Winner
			batchWins := 0
			for round := range rounds {
				batch := s12Evs("b", 1+2*(round%2))
				rivalBatches := make([][]eventstore.EventData, rivals)
				for i := range rivalBatches {
					rivalBatches[i] = s12Evs("r", 1+(round+i)%2)
				}
				results := make([]eventstore.AppendResult, same+rivals)
				errs := make([]error, same+rivals)
				s12AtOnce(same+rivals, func(w int) {
					evs := batch
					if w >= same {
						evs = rivalBatches[w-same]
					}
					results[w], errs[w] = s.Append(ctx, stream, exp, evs...)
				})
				var winner *s12Winner
				rivalWon := -1
				for w := same; w < same+rivals; w++ {
					if errs[w] == nil {
						require.Equal(t, -1, rivalWon, "round %d: two rivals won", round)
						require.False(t, results[w].Duplicate)
						rivalWon = w
						r := results[w]
						winner = &s12Winner{r.FirstVersion, r.LastVersion, s12DataIDs(rivalBatches[w-same]), r.Position}
					}
				}
				if rivalWon >= 0 {
					for w := range same {
						s12RequireWrongVersion(t, errs[w], stream, exp, eventstore.Exact(winner.last), "round %d: a rival won, batch append %d", round, w)
					}
				} else {
					batchWins++
					writers := 0
					for w := range same {
						require.NoError(t, errs[w], "round %d: batch append %d", round, w)
						if !results[w].Duplicate {
							writers++
						}
						require.Equal(t, results[0].FirstVersion, results[w].FirstVersion, "round %d", round)
						require.Equal(t, results[0].LastVersion, results[w].LastVersion, "round %d", round)
						require.Equal(t, results[0].Position, results[w].Position, "round %d", round)
					}
					require.Equal(t, 1, writers, "round %d: the batch was written by %d appends", round, writers)
					r := results[0]
					winner = &s12Winner{r.FirstVersion, r.LastVersion, s12DataIDs(batch), r.Position}
					for w := same; w < same+rivals; w++ {
						s12RequireWrongVersion(t, errs[w], stream, exp, eventstore.Exact(winner.last), "round %d: rival %d", round, w)
					}
				}
				winners = append(winners, *winner)
				exp = eventstore.Exact(winner.last)
			}
			s12CheckWinners(t, stream, s12Read(t, s, stream), winners)
			t.Logf("the repeated batch won %d of %d rounds", batchWins, rounds)
		})
	}
}

// All kinds at once on one stream: Append with Exact, NoStream, Any and
// StreamExists, one event or several, and AppendTx in transactions that
// also write another stream first. Afterwards: the stream is contiguous,
// each success holds its reported versions, each refusal wrote nothing,
// and ReadAll delivers every stream in version order.
func TestReviewS12MixedKindsRace(t *testing.T) {
	for _, mode := range s12Modes {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			s := s12Store(t, mode, 24)
			const stream, workers, attempts = "race-mixed", 16, 20
			var mu sync.Mutex
			var winners []s12Winner
			var lost []uuid.UUID
			errs := make(chan error, workers)
			s12AtOnce(workers, func(w int) {
				rng := rand.New(rand.NewPCG(uint64(w), 12))
				known := eventstore.NoStream
				for a := range attempts {
					n := 1
					if rng.IntN(3) == 0 {
						n = 2 + rng.IntN(3)
					}
					evs := s12Evs(fmt.Sprintf("m%d-%d", w, a), n)
					var exp eventstore.ExpectedVersion
					switch rng.IntN(6) {
					case 0:
						exp = eventstore.Any
					case 1:
						exp = eventstore.StreamExists
					case 2:
						exp = eventstore.NoStream
					default:
						exp = known
					}
					var r eventstore.AppendResult
					var err error
					inTx := w%4 == 3
					if inTx {
						side := fmt.Sprintf("side-%d", w)
						var refused error
						_, err = inTxRetrying(ctx, s, func(ctx context.Context, tx pgx.Tx, _ int) error {
							refused = nil
							if _, err := s.AppendTx(ctx, tx, side, eventstore.Any, s12Ev("side")); err != nil {
								return err
							}
							var aerr error
							r, aerr = s.AppendTx(ctx, tx, stream, exp, evs...)
							if errors.Is(aerr, eventstore.ErrWrongVersion) {
								refused = aerr // keep the side event, report the refusal below
								return nil
							}
							return aerr
						})
						if err == nil && refused != nil {
							err = refused
						}
					} else {
						r, err = s.Append(ctx, stream, exp, evs...)
					}
					if err == nil {
						if r.Duplicate {
							errs <- fmt.Errorf("worker %d: duplicate of fresh IDs", w)
							return
						}
						if v, ok := exp.Version(); ok && r.FirstVersion != v+1 || exp.IsNoStream() && r.FirstVersion != 0 ||
							exp.IsStreamExists() && r.FirstVersion == 0 {
							errs <- fmt.Errorf("worker %d: expected %s, written from %d", w, exp, r.FirstVersion)
							return
						}
						mu.Lock()
						winners = append(winners, s12Winner{r.FirstVersion, r.LastVersion, s12DataIDs(evs), r.Position})
						mu.Unlock()
						known = eventstore.Exact(r.LastVersion)
						continue
					}
					mu.Lock()
					lost = append(lost, s12DataIDs(evs)...)
					mu.Unlock()
					var wv *eventstore.WrongVersionError
					if !errors.As(err, &wv) {
						errs <- fmt.Errorf("worker %d: expected %s: %T %w", w, exp, err, err)
						return
					}
					if exp.IsAny() || wv.Expected != exp || wv.Stream != stream || wv.Actual.Matches(0, false) && exp.IsNoStream() {
						errs <- fmt.Errorf("worker %d: expected %s: bad refusal %v", w, exp, err)
						return
					}
					if v, ok := exp.Version(); ok {
						if av, ok := wv.Actual.Version(); !ok || av <= v {
							errs <- fmt.Errorf("worker %d: expected %s, refused with actual %s", w, exp, wv.Actual)
							return
						}
					}
					known = wv.Actual
				}
			})
			got := s12Settle(t, s, stream, errs, winners, lost)
			order := newVersionOrder()
			for e, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
				require.NoError(t, err)
				require.NoError(t, order.check(e))
			}
			t.Logf("%d winners, %d events, %d in the log", len(winners), len(got), order.seen)
		})
	}
}

// 32 goroutines of single-event appends from one store (group commit):
// each on its own stream with Exact/NoStream, and every other one on a
// shared stream with Exact(the version it last saw).
func TestReviewS12GroupCommitExact(t *testing.T) {
	for _, mode := range s12Modes {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			s := s12Store(t, mode, 0)
			const workers, per = 32, 15
			const shared = "grp-shared"
			var mu sync.Mutex
			var winners []s12Winner
			own := make([][]s12Winner, workers)
			errs := make(chan error, workers)
			s12AtOnce(workers, func(w int) {
				mine := fmt.Sprintf("grp-%d", w)
				sharedExp := eventstore.NoStream
				for i := range per {
					exp := eventstore.NoStream
					if i > 0 {
						exp = eventstore.Exact(uint64(i - 1))
					}
					e := s12Ev("own")
					r, err := s.Append(ctx, mine, exp, e)
					if err != nil || r.FirstVersion != uint64(i) || r.Duplicate {
						errs <- fmt.Errorf("worker %d own %d: %+v %v", w, i, r, err)
						return
					}
					own[w] = append(own[w], s12Winner{r.FirstVersion, r.LastVersion, []uuid.UUID{e.ID}, r.Position})
					// A refused own append (behind and beyond) writes nothing.
					if i%5 == 4 {
						_, err := s.Append(ctx, mine, eventstore.Exact(uint64(i-1)), s12Ev("late"))
						var wv *eventstore.WrongVersionError
						if !errors.As(err, &wv) || wv.Actual != eventstore.Exact(uint64(i)) {
							errs <- fmt.Errorf("worker %d own %d: stale Exact: %v", w, i, err)
							return
						}
						_, err = s.Append(ctx, mine, eventstore.Exact(uint64(i+1)), s12Ev("early"))
						if !errors.As(err, &wv) || wv.Actual != eventstore.Exact(uint64(i)) {
							errs <- fmt.Errorf("worker %d own %d: future Exact: %v", w, i, err)
							return
						}
					}
					if w%2 == 1 {
						continue
					}
					se := s12Ev("shared")
					r, err = s.Append(ctx, shared, sharedExp, se)
					if err == nil {
						mu.Lock()
						winners = append(winners, s12Winner{r.FirstVersion, r.LastVersion, []uuid.UUID{se.ID}, r.Position})
						mu.Unlock()
						sharedExp = eventstore.Exact(r.LastVersion)
						continue
					}
					var wv *eventstore.WrongVersionError
					if !errors.As(err, &wv) {
						errs <- fmt.Errorf("worker %d shared: %w", w, err)
						return
					}
					av, ok := wv.Actual.Version()
					ev, isExact := sharedExp.Version()
					if !ok || isExact && av <= ev {
						errs <- fmt.Errorf("worker %d shared: expected %s, actual %s", w, sharedExp, wv.Actual)
						return
					}
					sharedExp = wv.Actual
				}
			})
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			for w := range workers {
				stream := fmt.Sprintf("grp-%d", w)
				s12CheckWinners(t, stream, s12Read(t, s, stream), own[w])
			}
			s12CheckWinners(t, shared, s12Read(t, s, shared), winners)
			order := newVersionOrder()
			for e, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
				require.NoError(t, err)
				require.NoError(t, order.check(e))
			}
			require.Equal(t, workers*per+len(winners), order.seen)
		})
	}
}

// An append whose acknowledgement is lost (its context ends while it is
// on its way: it may or may not have committed) is retried with the same
// events and expected version: the stream holds them once, at the place
// the expected version names, and the retry says so (Duplicate or a
// write). Then, once the stream has moved on, the same retry is still a
// duplicate, and one with an expected version that no longer matches is a
// displaced conflict.
func TestReviewS12RetryAfterLostAck(t *testing.T) {
	for _, mode := range s12Modes {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			s := s12Store(t, mode, 0)
			dups, writes, lostAcks, lostButStored := 0, 0, 0, 0
			for round := range 60 {
				stream := fmt.Sprintf("ack-%d", round)
				exp := eventstore.NoStream
				if round%2 == 1 {
					_, err := s.Append(ctx, stream, eventstore.NoStream, s12Evs("pre", 2)...)
					require.NoError(t, err)
					exp = eventstore.Exact(1)
				}
				first := uint64(0)
				if v, ok := exp.Version(); ok {
					first = v + 1
				}
				evs := s12Evs("a", 1+round%3)
				timeout := time.Duration(1+rand.IntN(800)) * time.Microsecond
				cctx, cancel := context.WithTimeout(ctx, timeout)
				r0, err0 := s.Append(cctx, stream, exp, evs...)
				cancel()
				r, err := s.Append(ctx, stream, exp, evs...)
				require.NoError(t, err, "round %d: retry after %v", round, err0)
				if err0 == nil {
					require.True(t, r.Duplicate, "round %d: the first attempt succeeded, the retry must be a duplicate", round)
					require.Equal(t, r0.Position, r.Position)
				}
				if r.Duplicate {
					dups++
				} else {
					writes++
				}
				if err0 != nil {
					lostAcks++
					if r.Duplicate {
						lostButStored++
					}
				}
				require.Equal(t, first, r.FirstVersion, "round %d", round)
				require.Equal(t, first+uint64(len(evs))-1, r.LastVersion, "round %d", round)
				got := s12Read(t, s, stream)
				require.Len(t, got, int(first)+len(evs), "round %d: the events are stored %s", round, "more or less than once")
				require.Equal(t, s12DataIDs(evs), s12IDs(got[first:]))
				require.Equal(t, r.Position, got[len(got)-1].Position)

				// The stream moves on; the same retry is still a duplicate,
				r2, err := s.Append(ctx, stream, eventstore.Exact(r.LastVersion), s12Ev("later"))
				require.NoError(t, err)
				again, err := s.Append(ctx, stream, exp, evs...)
				require.NoError(t, err)
				require.True(t, again.Duplicate)
				require.Equal(t, r.Position, again.Position)
				require.Equal(t, r.FirstVersion, again.FirstVersion)
				// and with the stream's current version it is displaced.
				for _, other := range []eventstore.ExpectedVersion{eventstore.Exact(r2.LastVersion), eventstore.Exact(r.LastVersion), eventstore.NoStream, eventstore.Exact(first + 5)} {
					if other == exp {
						continue
					}
					_, err = s.Append(ctx, stream, other, evs...)
					var conflict *eventstore.EventIDConflictError
					require.ErrorAs(t, err, &conflict, "round %d: retry expecting %s: %v", round, other, err)
					require.True(t, conflict.Displaced)
					require.Equal(t, first, conflict.StoredVersion)
				}
				require.Len(t, s12Read(t, s, stream), int(first)+len(evs)+1)
			}
			t.Logf("%d retries found their events stored, %d wrote them; %d first attempts failed, of which %d had been stored",
				dups, writes, lostAcks, lostButStored)
		})
	}
}
