// Package storetest is the conformance suite that every
// [eventstore.Store] passes unchanged, in the spirit of testing/fstest.
//
// A store's own test calls [Run] once:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t testing.TB) eventstore.Store {
//			s := memory.New()
//			t.Cleanup(func() { s.Close() })
//			return s
//		}, storetest.Options{ReadModel: storetest.TxReadModel(add, get)})
//	}
//
// Run finds out what else the store is, as fstest.TestFS probes a file
// system: each interface of package storekit that the store implements
// has its suite, and so have the consumers built on them. Beside the
// store's own contract it runs the command bus's suite (commandtest), the
// saga suite (sagatest) on a store that keeps checkpoints and dead
// letters, and the projection suite (projectiontest) on a store with
// transactions, with what [Options] says. A part that does not apply is
// a skipped subtest that says which interface or option it lacks, so that
// `go test -v` shows what a store was not checked for.
//
// The suite names its streams and consumers uniquely, so it also runs
// against a store that already holds events (a shared server), but each
// factory call should return a new store where that is cheap.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/command/commandtest"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/check"
	"github.com/cairn-es/cairn/projection/projectiontest"
	"github.com/cairn-es/cairn/saga/sagatest"
)

// Factory returns a new store for one test and registers its cleanup with
// t.Cleanup. The suite may call Close itself; Close must be idempotent.
type Factory func(t testing.TB) eventstore.Store

// Options tell [Run] what it cannot find out from a store. The zero value
// runs every suite that the store's interfaces allow, at full size, except
// those that need a transaction type (see ReadModel).
type Options struct {
	// ReadModel names the store's transaction type, for the suites of
	// [storekit.TxCheckpointStore] and [storekit.TxLeaseStore], and says
	// how the projection suite keeps a read model in those transactions.
	// Make it with [TxReadModel]. Nil skips these suites.
	ReadModel ReadModel
	// Open opens the store kept in dir, creating it when dir is empty, and
	// registers its cleanup with t.Cleanup. Several processes open one dir
	// at once. The projection suite's crash and two-process tests need it
	// (they re-run the test binary and kill it); nil skips them, as an
	// in-memory store must.
	Open func(t testing.TB, dir string) eventstore.Store
	// Commands sizes the command bus's suite; the zero value runs it at
	// full size.
	Commands commandtest.Options
}

// ReadModel is a store's transaction type and a read model kept in its
// transactions; [TxReadModel] makes one.
type ReadModel interface {
	// run runs the suites that need the transaction type.
	run(p *parts, newStore Factory, opts Options, probe eventstore.Store)
}

// TxReadModel returns the [ReadModel] of a store whose transactions are
// of type Tx (the store is a [storekit.TxCheckpointStore] of Tx): add adds
// delta to the counter key in tx, creating it at zero, and get returns the
// committed value of key in s, zero when it has none. The counters live
// in the store's own database (a table of them, for an SQL store), so
// that a projection's read model commits with its checkpoint. With add or
// get nil, the transactional suites run but the projection suite does
// not.
func TxReadModel[Tx any](add func(ctx context.Context, tx Tx, key string, delta int64) error, get func(t testing.TB, s eventstore.Store, key string) int64) ReadModel {
	return txReadModel[Tx]{add: add, get: get}
}

type txReadModel[Tx any] struct {
	add func(ctx context.Context, tx Tx, key string, delta int64) error
	get func(t testing.TB, s eventstore.Store, key string) int64
}

// Run runs against the stores that newStore makes, each test on a store
// of its own, every conformance suite that applies to them: the event
// store's always; those of the storekit interfaces the store implements;
// and the command, saga and projection suites. The parts it skips are
// skipped subtests that say why.
func Run(t *testing.T, newStore Factory, opts Options) {
	probe := newStore(t)
	parts := &parts{t: t}
	defer parts.report(probe)
	parts.ran("Events")
	t.Run("Events", func(t *testing.T) {
		for _, g := range []struct {
			name  string
			tests []test
		}{
			{"Append", appendTests},
			{"Idempotency", idempotencyTests},
			{"BadInput", badInputTests},
			{"Read", readTests},
			{"Subscribe", subscribeTests},
			{"Concurrency", concurrencyTests},
		} {
			t.Run(g.name, func(t *testing.T) { runCases(t, newStore, g.tests) })
		}
	})
	runIf[indexedStore](parts, "CommandIndex", "storekit.CommandIndex", probe, newStore, commandIndexTests)
	runIf[storekit.SnapshotStore](parts, "Snapshots", "storekit.SnapshotStore", probe, newStore, snapshotTests)
	runIf[storekit.CheckpointStore](parts, "Checkpoints", "storekit.CheckpointStore", probe, newStore, checkpointTests)
	runIf[storekit.DeadLetterStore](parts, "DeadLetters", "storekit.DeadLetterStore", probe, newStore, deadLetterTests)
	runIf[storekit.LeaseStore](parts, "Leases", "storekit.LeaseStore", probe, newStore, leaseTests)
	runIf[catalogStore](parts, "Catalog", "storekit.Catalog", probe, newStore, catalogTests)
	if _, _, own := storekit.StreamPagesOf(probe); own {
		runIf[pagedStore](parts, "PagedStreams", "storekit.PagedStreams", probe, newStore, pagedStreamTests)
	} else {
		// A decorator that embeds a paged store has its StreamPages, but
		// is read through its own ReadStream.
		parts.skip("PagedStreams", fmt.Sprintf("%T hands out no page reader of its own (storekit.StreamPagesOf)", probe))
	}
	if opts.ReadModel != nil {
		opts.ReadModel.run(parts, newStore, opts, probe)
	} else {
		why := "Options.ReadModel names no transaction type"
		if _, ok := reflect.TypeOf(probe).MethodByName("InTx"); ok {
			why = fmt.Sprintf("%T has InTx, but %s: give one with TxReadModel", probe, why)
		}
		parts.skip("TxDeadLetters", why)
		parts.skip("TxLeases", why)
		parts.skip("Projections", why)
	}
	parts.ran("Commands")
	t.Run("Commands", func(t *testing.T) {
		commandtest.RunWith(t, commandtest.Factory(newStore), opts.Commands)
	})
	if _, ok := probe.(sagatest.ConsumerStore); ok {
		parts.ran("Sagas")
		t.Run("Sagas", func(t *testing.T) {
			sagatest.Run(t, func(t testing.TB) sagatest.Stores {
				s := newStore(t)
				return sagatest.Stores{Events: s, Consumers: s.(sagatest.ConsumerStore)}
			})
		})
	} else {
		_, cp := probe.(storekit.CheckpointStore)
		_, dl := probe.(storekit.DeadLetterStore)
		parts.skip("Sagas", fmt.Sprintf("%T %s", probe, lacks(map[string]bool{"storekit.CheckpointStore": cp, "storekit.DeadLetterStore": dl})))
	}
}

func (m txReadModel[Tx]) run(p *parts, newStore Factory, opts Options, probe eventstore.Store) {
	var tx Tx
	if err := m.fits(probe); err != nil {
		p.t.Error(err)
		return
	}
	runIf[txDeadLetterStore[Tx]](p, "TxDeadLetters", fmt.Sprintf("storekit.TxCheckpointStore[%T] and storekit.DeadLetterStore", tx), probe, newStore, txDeadLetterTests[Tx]())
	runIf[txLeaseStore[Tx]](p, "TxLeases", fmt.Sprintf("storekit.TxLeaseStore[%T] and storekit.LeaseStore", tx), probe, newStore, txLeaseTests[Tx]())
	if m.add == nil || m.get == nil {
		p.skip("Projections", "TxReadModel was given no add or get")
		return
	}
	if _, ok := probe.(projectiontest.ConsumerStore[Tx]); !ok {
		_, dl := probe.(storekit.DeadLetterStore)
		_, ls := probe.(storekit.LeaseStore)
		p.skip("Projections", fmt.Sprintf("%T %s", probe, lacks(map[string]bool{"storekit.DeadLetterStore": dl, "storekit.LeaseStore": ls})))
		return
	}
	p.ran("Projections")
	if opts.Open == nil {
		p.skipped = append(p.skipped, "the projections' crash and two-process tests (Options.Open is nil)")
	}
	p.t.Run("Projections", func(t *testing.T) { projectiontest.Run(t, m.harness(newStore, opts)) })
}

// harness is the projection suite's harness on the stores that newStore
// makes: events and consumers in one store.
func (m txReadModel[Tx]) harness(newStore Factory, opts Options) projectiontest.Harness[Tx] {
	stores := func(s eventstore.Store) projectiontest.Stores[Tx] {
		return projectiontest.Stores[Tx]{Events: s, Consumers: s.(projectiontest.ConsumerStore[Tx])}
	}
	h := projectiontest.Harness[Tx]{
		New: func(t testing.TB) projectiontest.Stores[Tx] { return stores(newStore(t)) },
		Add: m.add,
		Get: func(t testing.TB, s projectiontest.Stores[Tx], key string) int64 { return m.get(t, s.Events, key) },
	}
	if opts.Open != nil {
		h.Open = func(t testing.TB, dir string) projectiontest.Stores[Tx] { return stores(opts.Open(t, dir)) }
	}
	return h
}

// parts records which parts of the suite ran and which were skipped, for
// the summary at the end of [Run].
type parts struct {
	t       *testing.T
	names   []string
	skipped []string
}

func (p *parts) ran(name string) { p.names = append(p.names, name) }

// skip reports part name skipped, and why, as a subtest of its own: `go
// test -v` lists it with the reason.
func (p *parts) skip(name, why string) {
	p.skipped = append(p.skipped, name+" ("+why+")")
	p.t.Run(name, func(t *testing.T) { t.Skip("storetest: skipped: " + why) })
}

// report logs what ran and what was skipped.
func (p *parts) report(probe eventstore.Store) {
	skipped := "nothing"
	if len(p.skipped) > 0 {
		skipped = strings.Join(p.skipped, "; ")
	}
	p.t.Logf("storetest: %T: ran %s; skipped %s", probe, strings.Join(p.names, ", "), skipped)
}

// runIf runs the cases of part name when probe is an S, each case on a
// store of its own; otherwise it reports the part skipped, saying that the
// store is not what (the interfaces S stands for, as a store author knows
// them).
func runIf[S any](p *parts, name, what string, probe eventstore.Store, newStore Factory, cases []testCase[S]) {
	if _, ok := probe.(S); !ok {
		p.skip(name, fmt.Sprintf("%T is not a %s", probe, what))
		return
	}
	p.ran(name)
	p.t.Run(name, func(t *testing.T) {
		runCases(t, func(t testing.TB) S { return newStore(t).(S) }, cases)
	})
}

// testCase is one conformance test of a store of type S.
type testCase[S any] struct {
	name string
	run  func(t testing.TB, s S)
}

// test is a case of the event store suite.
type test = testCase[eventstore.Store]

// runCases runs each case as a subtest, on a store of its own.
func runCases[S any](t *testing.T, newStore func(t testing.TB) S, cases []testCase[S]) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newStore(t)) })
	}
}

// waitLimit bounds how long the suite waits for something that must happen
// (a live event to arrive, a canceled subscription to end). It is a
// liveness bound, far above any healthy store's latency, not a speed check.
const waitLimit = 15 * time.Second

// names hands out stream names that no other test run uses, all in one
// category so that a prefix filter selects exactly this test's streams.
type names struct{ category string }

func newNames(t testing.TB) names {
	var b [6]byte
	_, err := rand.Read(b[:])
	check.NoError(t, err)
	return names{category: "st" + hex.EncodeToString(b[:])}
}

// stream returns the stream of entity id in this test's category.
func (n names) stream(id string) string { return n.category + "-" + id }

// filter selects this test's streams.
func (n names) filter() eventstore.Filter {
	return eventstore.Filter{StreamPrefixes: []string{eventstore.Category(n.category)}}
}

// event returns an event with a fresh ID, the given type and a small payload.
func event(typ string, payload string) eventstore.EventData {
	return eventstore.EventData{
		ID:            uuid.New(),
		Type:          typ,
		SchemaVersion: 1,
		Data:          []byte(fmt.Sprintf(`{"payload":%q}`, payload)),
	}
}

// events returns n events of type typ.
func events(typ string, n int) []eventstore.EventData {
	out := make([]eventstore.EventData, n)
	for i := range out {
		out[i] = event(typ, fmt.Sprint(i))
	}
	return out
}

// readStream collects a whole stream read, failing the test on error.
func readStream(t testing.TB, s eventstore.Store, stream string, opts eventstore.ReadOptions) []eventstore.Event {
	t.Helper()
	var out []eventstore.Event
	for e, err := range s.ReadStream(context.Background(), stream, opts) {
		check.NoError(t, err, "reading stream %q", stream)
		out = append(out, e)
	}
	return out
}

// readAll collects a whole ReadAll, failing the test on error.
func readAll(t testing.TB, s eventstore.Store, after eventstore.Position, f eventstore.Filter) []eventstore.Event {
	t.Helper()
	var out []eventstore.Event
	for e, err := range s.ReadAll(context.Background(), after, f) {
		check.NoError(t, err, "reading all after %s", after)
		out = append(out, e)
	}
	return out
}

// ids returns the IDs of events to append, in order.
func ids(events []eventstore.EventData) []uuid.UUID {
	out := make([]uuid.UUID, len(events))
	for i, e := range events {
		out[i] = e.ID
	}
	return out
}

// recordedIDs returns the IDs of recorded events, in order.
func recordedIDs(events []eventstore.Event) []uuid.UUID {
	out := make([]uuid.UUID, len(events))
	for i, e := range events {
		out[i] = e.ID
	}
	return out
}

// mustAppend appends and fails the test on error.
func mustAppend(t testing.TB, s eventstore.Store, stream string, expected eventstore.ExpectedVersion, evs ...eventstore.EventData) eventstore.AppendResult {
	t.Helper()
	r, err := s.Append(context.Background(), stream, expected, evs...)
	check.NoError(t, err, "append to %q expecting %s", stream, expected)
	return r
}

// requireIncreasing checks that positions strictly increase.
func requireIncreasing(t testing.TB, evs []eventstore.Event) {
	t.Helper()
	for i := 1; i < len(evs); i++ {
		check.True(t, evs[i-1].Position.Before(evs[i].Position),
			"position %s (event %d) is not before %s (event %d)", evs[i-1].Position, i-1, evs[i].Position, i)
	}
}

// lacks says which of the interfaces a store lacks, given whether it
// implements each.
func lacks(has map[string]bool) string {
	var missing []string
	for name, ok := range has {
		if !ok {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	return "is not a " + strings.Join(missing, " nor a ")
}

// fits refuses a read model for transactions the store does not have:
// Options.ReadModel says the store has transactions of type Tx, so a store
// without them is a set-up mistake to report, not a part to skip.
func (m txReadModel[Tx]) fits(probe eventstore.Store) error {
	if _, ok := probe.(storekit.TxCheckpointStore[Tx]); !ok {
		var tx Tx
		return fmt.Errorf("storetest: Options.ReadModel is for transactions of type %T, but %T is not a storekit.TxCheckpointStore[%T]", tx, probe, tx)
	}
	return nil
}
