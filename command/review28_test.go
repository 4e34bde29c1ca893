package command_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/retry"
)

// r28Tally is an aggregate whose decisions depend on its state, in the
// number and the types of the events they produce.
type r28Tally struct {
	Count int `json:"count"`
	Marks int `json:"marks"`
}

type (
	r28Added  struct{ N int }
	r28Marked struct{ Tag string }

	// r28Add adds 1: one event, always.
	r28Add struct{ ID string }
	// r28Grow produces 1 + Count%3 events: redecided later, it has more
	// or fewer events than the first time.
	r28Grow struct{ ID string }
	// r28Shift produces an r28Added on an even count, an r28Marked on an
	// odd one: redecided, its one event may change type.
	r28Shift struct{ ID string }
	// r28Below is accepted with one event while Count < Max, and refused
	// after (a decision that may append nothing when decided again).
	r28Below struct {
		ID  string
		Max int
	}
	// r28Probe appends nothing when Count == Want, and is refused else.
	r28Probe struct {
		ID   string
		Want int
	}
	// r28Fragile panics unless Count >= Min, and then adds 1.
	r28Fragile struct {
		ID  string
		Min int
	}
)

var errR28Full = errors.New("tally: full")

func (c r28Add) AggregateID() string     { return c.ID }
func (c r28Grow) AggregateID() string    { return c.ID }
func (c r28Shift) AggregateID() string   { return c.ID }
func (c r28Below) AggregateID() string   { return c.ID }
func (c r28Probe) AggregateID() string   { return c.ID }
func (c r28Fragile) AggregateID() string { return c.ID }

func (t *r28Tally) add(context.Context, r28Add) ([]any, error) { return []any{r28Added{N: 1}}, nil }
func (t *r28Tally) grow(context.Context, r28Grow) ([]any, error) {
	events := make([]any, 1+t.Count%3)
	for i := range events {
		events[i] = r28Added{N: 1}
	}
	return events, nil
}
func (t *r28Tally) shift(context.Context, r28Shift) ([]any, error) {
	if t.Count%2 == 0 {
		return []any{r28Added{N: 1}}, nil
	}
	return []any{r28Marked{Tag: "odd"}}, nil
}
func (t *r28Tally) below(_ context.Context, c r28Below) ([]any, error) {
	if t.Count >= c.Max {
		return nil, fmt.Errorf("%w: %d >= %d", errR28Full, t.Count, c.Max)
	}
	return []any{r28Added{N: 1}}, nil
}
func (t *r28Tally) probe(_ context.Context, c r28Probe) ([]any, error) {
	if t.Count != c.Want {
		return nil, fmt.Errorf("%w: count %d, want %d", errR28Full, t.Count, c.Want)
	}
	return nil, nil
}
func (t *r28Tally) fragile(_ context.Context, c r28Fragile) ([]any, error) {
	if t.Count < c.Min {
		panic("tally: stale state")
	}
	return []any{r28Added{N: 1}}, nil
}
func (t *r28Tally) added(e r28Added) { t.Count += e.N }
func (t *r28Tally) marked(r28Marked) { t.Marks++ }

func r28Registry(t testing.TB) *codec.Registry {
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, errors.Join(
		codec.Register[r28Added](reg, "tally.added", 1),
		codec.Register[r28Marked](reg, "tally.marked", 1),
		codec.Register[r28Tally](reg, "tally.state", 1),
		codec.Register[r28Add](reg, "tally.add", 1),
		codec.Register[r28Grow](reg, "tally.grow", 1),
		codec.Register[r28Shift](reg, "tally.shift", 1),
		codec.Register[r28Below](reg, "tally.below", 1),
		codec.Register[r28Probe](reg, "tally.probe", 1),
	))
	require.NoError(t, reg.Validate())
	return reg
}

func r28Bus(t testing.TB, store eventstore.Store, reg *codec.Registry, opts command.Options, snapshotEvery uint64) *command.Bus {
	t.Helper()
	typ, err := aggregate.NewType[r28Tally]("tally", aggregate.Options[r28Tally]{SnapshotEvery: snapshotEvery},
		aggregate.Handles((*r28Tally).add), aggregate.Handles((*r28Tally).grow), aggregate.Handles((*r28Tally).shift),
		aggregate.Handles((*r28Tally).below), aggregate.Handles((*r28Tally).probe), aggregate.Handles((*r28Tally).fragile),
		aggregate.Applies((*r28Tally).added), aggregate.Applies((*r28Tally).marked))
	require.NoError(t, err)
	if opts.Retry.Initial == 0 {
		opts.Retry.Initial = 1 // keep retries quick
	}
	b := command.New(store, reg, opts)
	require.NoError(t, errors.Join(
		command.Route[r28Add](b, typ), command.Route[r28Grow](b, typ), command.Route[r28Shift](b, typ),
		command.Route[r28Below](b, typ), command.Route[r28Probe](b, typ), command.Route[r28Fragile](b, typ)))
	return b
}

type r28Store struct {
	name string
	open func(t *testing.T) eventstore.Store
}

func r28Stores() []r28Store {
	mem := func(t *testing.T) eventstore.Store {
		s := memory.New()
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	lite := func(t *testing.T) eventstore.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "r28.db"), sqlite.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	return []r28Store{
		{"memory", mem},
		{"sqlite", lite},
		{"memory-no-index", func(t *testing.T) eventstore.Store { return struct{ eventstore.Store }{mem(t)} }},
		{"sqlite-no-index", func(t *testing.T) eventstore.Store { return struct{ eventstore.Store }{lite(t)} }},
	}
}

func r28Stream(t testing.TB, store eventstore.Store, stream string) []eventstore.Event {
	t.Helper()
	var out []eventstore.Event
	for e, err := range store.ReadStream(context.Background(), stream, eventstore.Forward(0)) {
		require.NoError(t, err)
		out = append(out, e)
	}
	return out
}

// TestReview28NoRetryPolicyAnswersOldCommands: a bus that does not retry
// (retry.Policy{Attempts: 1}, "one means no retry") used to answer a
// redelivered old command as a duplicate. Now, when the instance cannot
// answer for the command (loaded from a snapshot), the decision is
// appended, the store refuses it (its event IDs), and the bus gives up
// with a ContentionError before looking the command up: the redelivery
// can never succeed, a queue would redeliver it forever. The error does
// not even match eventstore.ErrWrongVersion as ContentionError promises.
func TestReview28NoRetryPolicyAnswersOldCommands(t *testing.T) {
	for _, st := range r28Stores() {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			store := st.open(t)
			reg := r28Registry(t)
			warm := r28Bus(t, store, reg, command.Options{}, 1)
			_, err := warm.Dispatch(ctx, command.Message{ID: "old", Command: r28Add{ID: "1"}})
			require.NoError(t, err)
			_, err = warm.Dispatch(ctx, command.Message{ID: "new", Command: r28Add{ID: "1"}})
			require.NoError(t, err)

			cold := r28Bus(t, store, reg, command.Options{NoCache: true, Retry: retry.Policy{Attempts: 1}}, 1)
			res, err := cold.Dispatch(ctx, command.Message{ID: "old", Command: r28Add{ID: "1"}})
			if err != nil {
				assert.ErrorIs(t, err, eventstore.ErrWrongVersion, "a ContentionError wraps a version conflict")
			}
			require.NoError(t, err, "the redelivered command is a duplicate")
			assert.True(t, res.Duplicate)
			assert.Equal(t, uint64(0), res.Version)
			assert.Len(t, r28Stream(t, store, "tally-1"), 2)
		})
	}
}

// TestReview28RedecidedOldCommand: an old command, redelivered to a bus
// whose instance cannot answer for it (loaded from a snapshot, or more
// than 1,024 commands later), is decided again on a state where it has
// more or fewer events, or events of another type, than the first time;
// the bus must answer with what the first dispatch stored and append
// nothing.
func TestReview28RedecidedOldCommand(t *testing.T) {
	cases := []struct {
		name  string
		first command.Command // dispatched at count 0 (ID "old")
		// then filler moves the count so that the redecision differs.
		filler int
	}{
		{"more events", r28Grow{ID: "1"}, 1},  // 1 event first, then 1+2%3 = 3
		{"fewer events", r28Grow{ID: "1"}, 2}, // count 0 -> 1 event; pick a first at count 2 below
		{"other type", r28Shift{ID: "1"}, 0},  // Added at 0, Marked at odd counts
		{"now refused", r28Below{ID: "1", Max: 1}, 3},
	}
	for _, st := range r28Stores() {
		for _, c := range cases {
			for _, how := range []string{"snapshot", "forgotten", "stale cache"} {
				t.Run(st.name+"/"+c.name+"/"+how, func(t *testing.T) {
					if how == "forgotten" && testing.Short() {
						t.Skip("-short: the forgotten case dispatches 1,032 commands per store to push the old command out of the instance's memory")
					}
					ctx := context.Background()
					store := st.open(t)
					reg := r28Registry(t)
					snap := uint64(0)
					if how == "snapshot" {
						snap = 1
					}
					a := r28Bus(t, store, reg, command.Options{}, snap)
					n := 0
					dispatch := func(b *command.Bus, cmd command.Command) {
						n++
						_, err := b.Dispatch(ctx, command.Message{ID: fmt.Sprint("fill-", n), Command: cmd})
						require.NoError(t, err)
					}
					if c.name == "fewer events" {
						dispatch(a, r28Add{ID: "1"})
						dispatch(a, r28Add{ID: "1"}) // count 2: grow gives 3 events
					}
					var stale *command.Bus
					if how == "stale cache" {
						stale = r28Bus(t, store, reg, command.Options{}, 0)
						want := 0
						if c.name == "fewer events" {
							want = 2
						}
						dispatch(stale, r28Probe{ID: "1", Want: want}) // cached before "old", appending nothing
					}
					first, err := a.Dispatch(ctx, command.Message{ID: "old", Command: c.first})
					require.NoError(t, err)
					for range c.filler {
						dispatch(a, r28Add{ID: "1"})
					}
					if how == "forgotten" {
						for range 1030 {
							dispatch(a, r28Add{ID: "1"})
						}
						// Keep count%3 as the case expects.
						for range (3 - 1030%3) % 3 {
							dispatch(a, r28Add{ID: "1"})
						}
					}
					before := r28Stream(t, store, "tally-1")

					b := stale
					if b == nil {
						b = r28Bus(t, store, reg, command.Options{NoCache: how == "snapshot"}, snap)
					}
					res, err := b.Dispatch(ctx, command.Message{ID: "old", Command: c.first})
					require.NoError(t, err)
					assert.True(t, res.Duplicate)
					assert.Equal(t, first.Version, res.Version)
					assert.Equal(t, first.Events, res.Events)
					assert.Len(t, r28Stream(t, store, "tally-1"), len(before), "nothing appended")
				})
			}
		}
	}
}

// TestReview28NoRetryTwoBusesTakeTurns: two buses (two processes) with
// retry.Policy{Attempts: 1} take turns on one aggregate, one command at a
// time, with no concurrency at all. Each bus decides on its cached state
// without reading, so every command after the other bus's fails with a
// ContentionError ("each losing a concurrent append") though nothing ran
// concurrently. Before, the cached state was refreshed first.
func TestReview28NoRetryTwoBusesTakeTurns(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	reg := r28Registry(t)
	noRetry := command.Options{Retry: retry.Policy{Attempts: 1}}
	buses := []*command.Bus{r28Bus(t, store, reg, noRetry, 0), r28Bus(t, store, reg, noRetry, 0)}
	var failed []string
	for i := range 6 {
		_, err := buses[i%2].Dispatch(ctx, command.Message{ID: fmt.Sprint("turn-", i), Command: r28Add{ID: "1"}})
		if err != nil {
			failed = append(failed, err.Error())
		}
	}
	assert.Empty(t, failed, "sequential commands through two buses")
}

// TestReview28StaleCacheDecisions: a bus whose cached state another bus
// has moved past must answer as the fresh state would: a no-op or a
// rejection is decided again on the refreshed state, a Handle that panics
// only on the stale state is decided again, and a decision that appends
// is refused and decided again.
func TestReview28StaleCacheDecisions(t *testing.T) {
	for _, st := range r28Stores() {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			store := st.open(t)
			reg := r28Registry(t)
			a := r28Bus(t, store, reg, command.Options{}, 0)
			b := r28Bus(t, store, reg, command.Options{}, 0)
			n := 0
			send := func(bus *command.Bus, cmd command.Command, record bool) (command.Result, error) {
				n++
				return bus.Dispatch(ctx, command.Message{ID: fmt.Sprint("m", n), Command: cmd, RecordRejection: record})
			}
			_, err := send(a, r28Probe{ID: "1", Want: 0}, false) // a caches count 0
			require.NoError(t, err)
			_, err = send(b, r28Add{ID: "1"}, false) // count 1
			require.NoError(t, err)

			res, err := send(a, r28Probe{ID: "1", Want: 0}, false)
			assert.ErrorIs(t, err, errR28Full, "stale no-op: the fresh state refuses")
			assert.True(t, res.Rejected)
			assert.Equal(t, 1, res.Attempts)

			_, err = send(b, r28Add{ID: "1"}, false) // count 2
			require.NoError(t, err)
			res, err = send(a, r28Probe{ID: "1", Want: 2}, false)
			assert.NoError(t, err, "stale rejection: the fresh state accepts")
			assert.Equal(t, uint64(1), res.Version)

			_, err = send(b, r28Add{ID: "1"}, false) // count 3
			require.NoError(t, err)
			res, err = send(a, r28Fragile{ID: "1", Min: 3}, false)
			require.NoError(t, err, "panics only on the stale state")
			assert.Equal(t, uint64(3), res.Version)

			_, err = send(b, r28Add{ID: "1"}, false) // count 5
			require.NoError(t, err)
			res, err = send(a, r28Below{ID: "1", Max: 5}, true)
			assert.ErrorIs(t, err, errR28Full, "a recorded rejection decided on the fresh state")
			assert.True(t, res.Rejected)
			res, err = send(b, r28Below{ID: "1", Max: 100}, true) // b is stale by the record
			require.NoError(t, err)
			assert.Equal(t, uint64(6), res.Version)
			assert.Len(t, r28Stream(t, store, "tally-1"), 7)
		})
	}
}

// TestReview28ReusedIDAndRecordedRejectionBelowMemory: a command ID whose
// outcome the instance cannot answer for (a snapshot; a stale cache) is
// found whatever its redecision appends: reused by another command type
// it is refused, a recorded rejection is answered as recorded, a success
// as the success, and nothing is appended.
func TestReview28ReusedIDAndRecordedRejectionBelowMemory(t *testing.T) {
	for _, st := range r28Stores() {
		for _, how := range []string{"snapshot", "stale cache"} {
			t.Run(st.name+"/"+how, func(t *testing.T) {
				ctx := context.Background()
				store := st.open(t)
				reg := r28Registry(t)
				snap := uint64(0)
				if how == "snapshot" {
					snap = 1
				}
				a := r28Bus(t, store, reg, command.Options{}, snap)
				var later *command.Bus
				if how == "stale cache" {
					later = r28Bus(t, store, reg, command.Options{}, 0)
					_, err := later.Dispatch(ctx, command.Message{ID: "warm", Command: r28Probe{ID: "1", Want: 0}})
					require.NoError(t, err)
				}
				// "ok": r28Below accepted at count 0. "rej": r28Below refused and recorded at count 1.
				_, err := a.Dispatch(ctx, command.Message{ID: "ok", Command: r28Below{ID: "1", Max: 1}})
				require.NoError(t, err)
				_, err = a.Dispatch(ctx, command.Message{ID: "rej", Command: r28Below{ID: "1", Max: 1}, RecordRejection: true})
				require.ErrorIs(t, err, errR28Full)
				for i := range 3 {
					_, err = a.Dispatch(ctx, command.Message{ID: fmt.Sprint("f", i), Command: r28Add{ID: "1"}})
					require.NoError(t, err)
				}
				before := len(r28Stream(t, store, "tally-1"))
				bus := func() *command.Bus {
					if later != nil {
						return later
					}
					return r28Bus(t, store, reg, command.Options{NoCache: true}, snap)
				}

				// Redelivered: the success now decides a rejection (recorded or not).
				for _, record := range []bool{false, true} {
					res, err := bus().Dispatch(ctx, command.Message{ID: "ok", Command: r28Below{ID: "1", Max: 1}, RecordRejection: record})
					require.NoError(t, err, "record %v", record)
					assert.True(t, res.Duplicate)
					assert.Equal(t, uint64(0), res.Version)
				}
				// Redelivered: the recorded rejection now decides a success.
				res, err := bus().Dispatch(ctx, command.Message{ID: "rej", Command: r28Below{ID: "1", Max: 100}, RecordRejection: true})
				assert.ErrorIs(t, err, command.ErrRecordedRejection)
				assert.True(t, res.Duplicate && res.Rejected)
				assert.Equal(t, uint64(1), res.Version)
				// Reused by another type: one that appends, one that appends nothing, one refused.
				for _, cmd := range []command.Command{r28Grow{ID: "1"}, r28Probe{ID: "1", Want: 5}, r28Probe{ID: "1", Want: 99}} {
					for _, id := range []string{"ok", "rej"} {
						_, err := bus().Dispatch(ctx, command.Message{ID: id, Command: cmd})
						assert.ErrorIs(t, err, command.ErrCommandIDReused, "%s reused by %T", id, cmd)
					}
				}
				assert.Len(t, r28Stream(t, store, "tally-1"), before, "nothing appended")
			})
		}
	}
}

// TestReview28TwoAttemptsAnswerAnOldCommandOnAStaleCache: with
// retry.Policy{Attempts: 2}, an old command redelivered to a bus whose
// cached instance predates it, in an aggregate that has had more commands
// since than an instance remembers, is decided on the cache (refused), then
// on the reloaded instance that forgot it (refused), and only the third
// attempt looks it up: the bus gives up with a ContentionError although
// the command is a plain duplicate and nobody else is appending.
func TestReview28TwoAttemptsAnswerAnOldCommandOnAStaleCache(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	reg := r28Registry(t)
	stale := r28Bus(t, store, reg, command.Options{Retry: retry.Policy{Attempts: 2}}, 0)
	_, err := stale.Dispatch(ctx, command.Message{ID: "warm", Command: r28Add{ID: "1"}}) // v0, cached
	require.NoError(t, err)
	other := r28Bus(t, store, reg, command.Options{}, 0)
	_, err = other.Dispatch(ctx, command.Message{ID: "gap", Command: r28Add{ID: "1"}}) // v1
	require.NoError(t, err)
	_, err = other.Dispatch(ctx, command.Message{ID: "old", Command: r28Add{ID: "1"}}) // v2
	require.NoError(t, err)
	for i := range 1030 {
		_, err = other.Dispatch(ctx, command.Message{ID: fmt.Sprint("f", i), Command: r28Add{ID: "1"}})
		require.NoError(t, err)
	}
	res, err := stale.Dispatch(ctx, command.Message{ID: "old", Command: r28Add{ID: "1"}})
	require.NoError(t, err, "a duplicate")
	assert.True(t, res.Duplicate)
	assert.Equal(t, uint64(2), res.Version)
}
