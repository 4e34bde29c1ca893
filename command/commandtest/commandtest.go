// Package commandtest is the command bus's test suite, run against any
// event store: storetest.Run runs it on every store, and a test can run it
// alone:
//
//	func TestCommandBus(t *testing.T) {
//		commandtest.Run(t, func(t testing.TB) eventstore.Store {
//			s := memory.New()
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// A store that also implements [storekit.SnapshotStore] keeps the
// snapshots; otherwise the suite keeps them in memory.
package commandtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/check"
)

// Factory returns a new store for one test and registers its cleanup with
// t.Cleanup. The suite names its aggregates uniquely, so a shared store
// works too.
type Factory func(t testing.TB) eventstore.Store

// Options size the suite. The zero value runs it at full size.
type Options struct {
	// HotWorkers and HotIncrements size the hot-aggregate tests: that many
	// goroutines each dispatch that many increments to one counter. Zero
	// means 32 and 100. A store that is slow under the race detector may run
	// fewer; the memory store runs the full size.
	HotWorkers, HotIncrements int
	// OutcomeRounds is how many rounds the test of one outcome per command
	// ID under contention runs (each a new aggregate, one command ID
	// dispatched five times against a change of state); zero means 200.
	OutcomeRounds int
}

// Run runs the whole suite, at full size, against the stores that newStore
// makes.
func Run(t *testing.T, newStore Factory) { RunWith(t, newStore, Options{}) }

// RunWith runs the whole suite, sized by opts, against the stores that
// newStore makes.
func RunWith(t *testing.T, newStore Factory, opts Options) {
	if opts.HotWorkers <= 0 {
		opts.HotWorkers = 32
	}
	if opts.HotIncrements <= 0 {
		opts.HotIncrements = 100
	}
	if opts.OutcomeRounds <= 0 {
		opts.OutcomeRounds = 200
	}
	groups := []struct {
		name  string
		tests []test
	}{
		{"Concurrency", concurrencyTests(opts)},
		{"Idempotency", idempotencyTests},
		{"Errors", errorTests},
		{"Snapshots", snapshotTests},
		{"Metadata", metadataTests},
		{"Cache", cacheTests},
		{"Rejections", rejectionTests(opts)},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) {
					tc.run(t, newEnv(t, newStore(t)))
				})
			}
		})
	}
}

type test struct {
	name string
	run  func(t testing.TB, env *env)
}

// env is one test's store, codec and naming.
type env struct {
	t      testing.TB
	store  eventstore.Store
	snaps  storekit.SnapshotStore
	reg    *codec.Registry
	prefix string // unique per test, so that a shared store works
	seq    int    // numbers the commands of increments
	log    *slog.Logger
}

func newEnv(t testing.TB, s eventstore.Store) *env {
	var b [4]byte
	_, err := rand.Read(b[:])
	check.NoError(t, err)
	e := &env{t: t, store: s, reg: newRegistry(t), prefix: "t" + hex.EncodeToString(b[:]) + "_",
		log: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if ss, ok := s.(storekit.SnapshotStore); ok {
		e.snaps = ss
	} else {
		e.snaps = memory.New()
	}
	return e
}

// id returns an aggregate ID unique to this test.
func (e *env) id(name string) string { return e.prefix + name }

// counterType returns the counter aggregate type, snapshotting every
// snapshotEvery events (zero: never).
func counterType(t testing.TB, snapshotEvery uint64) *aggregate.Type[Counter, *Counter] {
	typ, err := aggregate.NewType[Counter]("counter", aggregate.Options[Counter]{
		New:           func(id string) *Counter { return &Counter{ID: id} },
		SnapshotEvery: snapshotEvery,
	}, CounterBindings()...)
	check.NoError(t, err)
	return typ
}

// bus returns a bus on the test's store with every counter command routed.
func (e *env) bus(opts command.Options, snapshotEvery uint64) *command.Bus {
	e.t.Helper()
	return e.busOn(e.store, opts, snapshotEvery)
}

func (e *env) busOn(store eventstore.Store, opts command.Options, snapshotEvery uint64) *command.Bus {
	e.t.Helper()
	if opts.Snapshots == nil {
		opts.Snapshots = e.snaps
	}
	if opts.Logger == nil {
		opts.Logger = e.log
	}
	b := command.New(store, e.reg, opts)
	typ := counterType(e.t, snapshotEvery)
	check.NoError(e.t, command.Route[Increment](b, typ))
	check.NoError(e.t, command.Route[IncrementTwice](b, typ))
	check.NoError(e.t, command.Route[Reject](b, typ))
	check.NoError(e.t, command.Route[Explode](b, typ))
	check.NoError(e.t, command.Route[Nothing](b, typ))
	check.NoError(e.t, command.Route[CheckCount](b, typ))
	check.NoError(e.t, command.Route[Stamp](b, typ))
	check.NoError(e.t, command.Route[Echo](b, typ))
	check.NoError(e.t, command.Route[IncrementAt](b, typ))
	return b
}

// load loads a counter through a fresh repository (no cache, no snapshot).
func (e *env) load(id string) *Counter {
	e.t.Helper()
	repo, err := aggregate.NewRepository(e.store, e.reg, counterType(e.t, 0), aggregate.RepositoryOptions{})
	check.NoError(e.t, err)
	inst, err := repo.Load(context.Background(), id)
	check.NoError(e.t, err)
	return inst.State
}

// loadVia loads a counter through a repository that uses the test's
// snapshots (and takes none of its own).
func (e *env) loadVia(id string) *Counter {
	e.t.Helper()
	repo, err := aggregate.NewRepository(e.store, e.reg, counterType(e.t, 1_000_000), aggregate.RepositoryOptions{Snapshots: e.snaps, Logger: e.log})
	check.NoError(e.t, err)
	inst, err := repo.Load(context.Background(), id)
	check.NoError(e.t, err)
	return inst.State
}

// events reads a counter's whole stream.
func (e *env) events(id string) []eventstore.Event {
	e.t.Helper()
	var out []eventstore.Event
	for ev, err := range e.store.ReadStream(context.Background(), "counter-"+id, eventstore.Forward(0)) {
		check.NoError(e.t, err)
		out = append(out, ev)
	}
	return out
}

// dispatchUntilDone dispatches msg until it succeeds or fails with something
// other than a version conflict, as an at-least-once queue redelivers a
// message whose handler failed. It returns the final result and how many
// conflicts the bus gave up on.
func dispatchUntilDone(ctx context.Context, b *command.Bus, msg command.Message) (command.Result, int, error) {
	conflicts := 0
	for {
		res, err := b.Dispatch(ctx, msg)
		if errors.Is(err, eventstore.ErrWrongVersion) && ctx.Err() == nil {
			conflicts++
			continue
		}
		return res, conflicts, err
	}
}

// testWriter sends log lines to the test's log, shown when it fails.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
