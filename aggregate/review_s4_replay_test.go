package aggregate_test

// Review s4: pooled replayers. Loads, refreshes and duplicate saves of one
// repository, from many goroutines, over every way a replay can end: a
// snapshot, a snapshot past the end, upcast events of one or many values
// (past the 64 the pool keeps a buffer of), a store that fails mid-stream,
// an Apply that panics, an Apply that loads from the same repository, and
// streams that do not exist. None may carry anything into the next.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/upcast"
)

// S4Log remembers the values applied to it. An Added of -1 panics; one of
// -2 loads s4log "ref" from the same repository and notes its length +
// 10000.
type S4Log struct {
	ID   string `json:"id"`
	Seen []int  `json:"seen"`
}

type S4Added struct {
	N int `json:"n"`
}

// s4Repo is the repository S4Log's re-entrant Apply loads from.
var s4Repo atomic.Pointer[aggregate.Repository[S4Log, *S4Log]]

func (l *S4Log) added(e S4Added) {
	switch e.N {
	case -1:
		panic("s4: Apply panics")
	case -2:
		ref, err := s4Repo.Load().Load(context.Background(), "ref")
		if err != nil {
			panic(err)
		}
		l.Seen = append(l.Seen, 10000+len(ref.State.Seen))
	default:
		l.Seen = append(l.Seen, e.N)
	}
}

var errS4Mid = errors.New("s4: the store fails mid-stream")

// s4Store fails the reads of streams named s4log-broken-* at version 2.
type s4Store struct{ *memory.Store }

func (s s4Store) ReadStream(ctx context.Context, name string, opts eventstore.ReadOptions) iter.Seq2[eventstore.Event, error] {
	inner := s.Store.ReadStream(ctx, name, opts)
	if len(name) < 13 || name[:13] != "s4log-broken-" {
		return inner
	}
	return func(yield func(eventstore.Event, error) bool) {
		for e, err := range inner {
			if err == nil && e.Version == 2 {
				yield(eventstore.Event{}, errS4Mid)
				return
			}
			if !yield(e, err) {
				return
			}
		}
	}
}

func s4Setup(t *testing.T) (*memory.Store, *aggregate.Repository[S4Log, *S4Log]) {
	mem := memory.New()
	t.Cleanup(func() { _ = mem.Close() })
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[S4Added](reg, "s4.added", 1))
	require.NoError(t, codec.Register[S4Log](reg, "s4.state", 1))
	// s4.burst v1 {"from":x,"n":k} is k values x, x+1, ...
	require.NoError(t, reg.Upcast(upcast.Split("s4.burst", 1, func(r upcast.Raw) ([]upcast.Raw, error) {
		var v struct{ From, N int }
		if err := json.Unmarshal(r.Data, &v); err != nil {
			return nil, err
		}
		out := make([]upcast.Raw, v.N)
		for i := range out {
			out[i] = upcast.Raw{Type: "s4.added", Version: 1, Data: fmt.Appendf(nil, `{"n":%d}`, v.From+i)}
		}
		return out, nil
	}).Into(upcast.Key{Type: "s4.added", Version: 1})))
	typ, err := aggregate.NewType[S4Log]("s4log", aggregate.Options[S4Log]{
		New:           func(id string) *S4Log { return &S4Log{ID: id} },
		SnapshotEvery: 3,
	}, aggregate.Applies((*S4Log).added))
	require.NoError(t, err)
	repo, err := aggregate.NewRepository(s4Store{mem}, reg, typ, aggregate.RepositoryOptions{})
	require.NoError(t, err)
	s4Repo.Store(repo)
	t.Cleanup(func() { s4Repo.Store(nil) })
	return mem, repo
}

func s4Append(t *testing.T, store eventstore.Store, stream string, evs ...eventstore.EventData) {
	_, err := store.Append(context.Background(), stream, eventstore.Any, evs...)
	require.NoError(t, err)
}

func s4Added(n int) eventstore.EventData {
	return eventstore.EventData{Type: "s4.added", SchemaVersion: 1, Data: fmt.Appendf(nil, `{"n":%d}`, n)}
}

func s4Burst(from, n int) eventstore.EventData {
	return eventstore.EventData{Type: "s4.burst", SchemaVersion: 1, Data: fmt.Appendf(nil, `{"from":%d,"n":%d}`, from, n)}
}

// TestReviewS4ReplaysCarryNothing loads every kind of stream from eight
// goroutines, and checks every answer.
func TestReviewS4ReplaysCarryNothing(t *testing.T) {
	ctx := context.Background()
	mem, repo := s4Setup(t)

	type want struct {
		seen    []int
		version uint64
		err     func(error) bool
	}
	wants := map[string]want{}
	// ref: three values, saved (so it has a snapshot).
	ref, err := repo.Load(ctx, "ref")
	require.NoError(t, err)
	_, err = repo.Save(ctx, ref, []any{S4Added{1}, S4Added{2}, S4Added{3}}, aggregate.SaveOptions{})
	require.NoError(t, err)
	wants["ref"] = want{seen: []int{1, 2, 3}, version: 2}

	for k := 1; k <= 6; k++ {
		// plain-k: k values saved one at a time (snapshots from the third).
		id := fmt.Sprint("plain-", k)
		inst, err := repo.Load(ctx, id)
		require.NoError(t, err)
		var seen []int
		for i := range k {
			_, err := repo.Save(ctx, inst, []any{S4Added{i}}, aggregate.SaveOptions{})
			require.NoError(t, err)
			seen = append(seen, i)
		}
		wants[id] = want{seen: seen, version: uint64(k - 1)}

		// burst-k: bursts of k and of 70+k values between single ones.
		id = fmt.Sprint("burst-", k)
		s4Append(t, mem, "s4log-"+id, s4Added(7), s4Burst(100, k), s4Added(8), s4Burst(1000, 70+k), s4Added(9))
		seen = []int{7}
		for i := range k {
			seen = append(seen, 100+i)
		}
		seen = append(seen, 8)
		for i := range 70 + k {
			seen = append(seen, 1000+i)
		}
		wants[id] = want{seen: append(seen, 9), version: 4}

		// broken-k: the store fails at version 2.
		id = fmt.Sprint("broken-", k)
		for i := range k {
			s4Append(t, mem, "s4log-"+id, s4Added(i))
		}
		if k > 2 {
			wants[id] = want{err: func(err error) bool { return errors.Is(err, errS4Mid) }}
		} else {
			wants[id] = want{seen: []int{0, 1}[:k], version: uint64(k - 1)}
		}

		// panic-k: k values, then one whose Apply panics.
		id = fmt.Sprint("panic-", k)
		for i := range k {
			s4Append(t, mem, "s4log-"+id, s4Added(i))
		}
		s4Append(t, mem, "s4log-"+id, s4Added(-1))
		version := uint64(k)
		wants[id] = want{err: func(err error) bool {
			var ae *aggregate.ApplyError
			var pe *aggregate.PanicError
			return errors.As(err, &ae) && ae.Version == version && errors.As(err, &pe)
		}}

		// reent-k: k values around one whose Apply loads "ref".
		id = fmt.Sprint("reent-", k)
		s4Append(t, mem, "s4log-"+id, s4Added(5), s4Added(-2), s4Burst(50, k))
		seen = []int{5, 10003}
		for i := range k {
			seen = append(seen, 50+i)
		}
		wants[id] = want{seen: seen, version: 2}

		// past-k: k values, and a snapshot of version k+4 holding values
		// that are not the stream's (it was taken of events since lost).
		id = fmt.Sprint("past-", k)
		for i := range k {
			s4Append(t, mem, "s4log-"+id, s4Added(i*10))
		}
		require.NoError(t, mem.SaveSnapshot(ctx, storekit.Snapshot{Stream: "s4log-" + id, Version: uint64(k + 4),
			Type: "s4.state", SchemaVersion: 1, Data: fmt.Appendf(nil, `{"id":%q,"seen":[-99]}`, id)}))
		seen = nil
		for i := range k {
			seen = append(seen, i*10)
		}
		wants[id] = want{seen: seen, version: uint64(k - 1)}
	}
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range wants {
			if !yield(id) {
				return
			}
		}
	})

	check := func(id string, inst *aggregate.Instance[S4Log, *S4Log], err error) {
		w := wants[id]
		if w.err != nil {
			assert.True(t, w.err(err), "%s: %v", id, err)
			assert.Nil(t, inst, id)
			return
		}
		if assert.NoError(t, err, id) {
			assert.True(t, inst.Exists, id)
			assert.Equal(t, w.version, inst.Version, id)
			assert.Equal(t, w.seen, inst.State.Seen, id)
			assert.Equal(t, id, inst.State.ID, id)
		}
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 150 {
				id := ids[(g*7+i)%len(ids)]
				switch i % 5 {
				case 4:
					inst, err := repo.Load(ctx, fmt.Sprint("none-", g, "-", i))
					if assert.NoError(t, err) {
						assert.False(t, inst.Exists)
						assert.Empty(t, inst.State.Seen)
						assert.Equal(t, uint64(0), inst.Version)
					}
				case 3:
					// A refresh of a new instance of the stream (the bus's).
					fresh, err := repo.New(id)
					require.NoError(t, err)
					inst, err := busOf(repo).Refresh(ctx, fresh)
					check(id, inst, err)
				default:
					inst, err := repo.Load(ctx, id)
					check(id, inst, err)
				}
			}
		}()
	}
	wg.Wait()
}

// TestReviewS4DuplicateSavesUnderLoad: goroutines save the same commands
// (the same command IDs) from stale instances of one aggregate while
// others load it; every save's outcome is the stored decision, and every
// load sees each command's events once.
func TestReviewS4DuplicateSavesUnderLoad(t *testing.T) {
	ctx := context.Background()
	_, repo := s4Setup(t)
	const commands = 40
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range commands {
				if g >= 4 {
					inst, err := repo.Load(ctx, "dup")
					if assert.NoError(t, err) {
						seen := inst.State.Seen
						assert.True(t, slices.IsSorted(seen) && len(slices.Compact(slices.Clone(seen))) == len(seen),
							"a load sees each command once, in order: %v", seen)
					}
					continue
				}
				for {
					inst, err := repo.Load(ctx, "dup")
					if !assert.NoError(t, err) {
						return
					}
					// Command c adds c, once: its events take their IDs from
					// the command ID, so a second save of it is a duplicate
					// where it was stored, and refused elsewhere.
					if n := len(inst.State.Seen); n > c {
						break
					} else if n < c {
						continue // another goroutine's command comes first
					}
					out, err := repo.Save(ctx, inst, []any{S4Added{c}}, aggregate.SaveOptions{CommandID: fmt.Sprint("cmd-", c)})
					var wrong *eventstore.WrongVersionError
					if errors.As(err, &wrong) {
						continue
					}
					if !assert.NoError(t, err) {
						return
					}
					assert.Equal(t, []any{S4Added{c}}, out.Events, "command %d", c)
					assert.Equal(t, uint64(c), out.FirstVersion, "command %d", c)
					// A duplicate refreshes the instance to the stream's end.
					if assert.GreaterOrEqual(t, len(inst.State.Seen), c+1, "command %d: the instance after its save", c) {
						assert.Equal(t, c, inst.State.Seen[c])
					}
					break
				}
			}
		}()
	}
	wg.Wait()
	inst, err := repo.Load(ctx, "dup")
	require.NoError(t, err)
	want := make([]int, commands)
	for i := range want {
		want[i] = i
	}
	assert.Equal(t, want, inst.State.Seen)

	// A save of an old command from an instance loaded before it: the
	// stored outcome, and the instance refreshed to the end.
	stale, err := repo.New("dup")
	require.NoError(t, err)
	out, err := repo.Save(ctx, stale, []any{S4Added{0}}, aggregate.SaveOptions{CommandID: "cmd-0"})
	require.NoError(t, err)
	assert.True(t, out.Duplicate)
	assert.Equal(t, []any{S4Added{0}}, out.Events)
	assert.Equal(t, want, stale.State.Seen)
	assert.Equal(t, uint64(commands-1), stale.Version)
}
