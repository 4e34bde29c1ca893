package saga_test

// Regression tests for the sixteen edges of issue 20: each one asserts a
// promise of docs/sagas.md or DESIGN.md ("Sagas"), and failed on f0eeaa3.
// This file holds the cases of lost effects (1-7) and the set-up that the
// edges_*_test.go files share: a small saga type "edge" whose handlers each
// test chooses, an aggregate that its commands go to, and store wrappers that
// fail or race at a chosen call.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/internal/backoff"
	"github.com/cairn-es/cairn/saga"
	"github.com/cairn-es/cairn/saga/sagatest"
	"github.com/cairn-es/cairn/upcast"
)

// edgeState is the state of the edge saga: what its handlers saw, in order,
// and a counter for tests that must keep the state small.
type edgeState struct {
	Seen []string `json:"seen"`
	N    int      `json:"n"`
}

// The edge saga's events: edgeEvent starts an instance; edgeAny is mapped
// with AnyOrder. Pad makes an event as large as a test needs.
type (
	edgeEvent struct {
		ID, Text string
		Pad      string `json:",omitempty"`
	}
	edgeAny struct{ ID, Text string }
)

// edgeDue is the payload of the edge saga's deadlines.
type edgeDue struct{ Text string }

// The edge saga's commands, both handled by the edgeAccount aggregate
// named by Account, and the events they produce. Ref tells commands apart.
type (
	edgeCharge   struct{ Account, Ref string }
	edgeNotify   struct{ Account, Ref string }
	edgeCharged  struct{ Account, Ref string }
	edgeNotified struct{ Account, Ref string }
)

func (c edgeCharge) AggregateID() string { return c.Account }
func (c edgeNotify) AggregateID() string { return c.Account }

// edgeDeadlines are the deadline names the edge saga handles.
var edgeDeadlines = []string{"due", "a", "b", "remind"}

// errEdgeDeclined is the edge account's refusal, registered with the
// codec under the code "edge.declined".
var errEdgeDeclined = errors.New("declined")

// edgeAccount is the aggregate of the edge saga's commands: it counts the
// charges and notices applied, by Ref. An account whose ID starts with
// "reject" refuses every command (a rejection); one whose ID starts with
// "panic" panics in Handle.
type edgeAccount struct {
	Charges, Notices map[string]int
}

func (a *edgeAccount) Handle(_ context.Context, cmd any) ([]any, error) {
	var account string
	switch c := cmd.(type) {
	case edgeCharge:
		account = c.Account
	case edgeNotify:
		account = c.Account
	default:
		return nil, errors.New("unknown command")
	}
	switch {
	case strings.HasPrefix(account, "reject"):
		return nil, fmt.Errorf("account %s: %w", account, errEdgeDeclined)
	case strings.HasPrefix(account, "panic"):
		panic("the edge account panics")
	}
	switch c := cmd.(type) {
	case edgeCharge:
		return []any{edgeCharged(c)}, nil
	case edgeNotify:
		return []any{edgeNotified(c)}, nil
	}
	return nil, nil
}

func (a *edgeAccount) Apply(ev any) error {
	if a.Charges == nil {
		a.Charges, a.Notices = map[string]int{}, map[string]int{}
	}
	switch e := ev.(type) {
	case edgeCharged:
		a.Charges[e.Ref]++
	case edgeNotified:
		a.Notices[e.Ref]++
	}
	return nil
}

// edgeHooks are the edge saga's handlers; a nil one appends what it got to
// the state's Seen.
type edgeHooks struct {
	event    func(ctx context.Context, s *edgeState, e edgeEvent, out *saga.Output) error
	deadline func(ctx context.Context, name string, s *edgeState, p edgeDue, out *saga.Output) error
	// rejected handles the rejection of either command; ref is its Ref.
	rejected func(ctx context.Context, s *edgeState, ref string, reason error, out *saga.Output) error
	// eventVersion is the schema version the code registers edgeEvent at
	// (0: 1); a later one, without an upcaster, is code whose event type
	// changed without the upcaster that reads what the older code stored.
	eventVersion uint32
	// stateVersion is likewise the schema version of edgeState.
	stateVersion uint32
	// eventName is the name the code registers edgeEvent under (""
	// "edge.event"), and renamedFrom, when set, the older name that an
	// upcast.Rename step brings to it.
	eventName, renamedFrom string
}

// edgeRig is one version of the edge saga's code (registry, saga type, bus)
// on a store (see edgeStores), with checkpoints and a clock that the test
// moves. Siblings share the store, checkpoints and clock: other code, or
// other processes.
type edgeRig struct {
	store    eventstore.Store
	cps      sagatest.ConsumerStore
	clock    *sagatest.Clock
	reg      *codec.Registry
	typ      *saga.Type[edgeState]
	bus      *command.Bus
	accounts *aggregate.Repository[edgeAccount, *edgeAccount]
}

func newEdgeRig(t *testing.T, st edgeStores, hooks edgeHooks) *edgeRig {
	g := &edgeRig{clock: sagatest.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))}
	s := st(t)
	g.store, g.cps = s.Events, s.Consumers
	g.build(t, hooks, false)
	return g
}

// edgeStores opens the stores of one edge test (see TestEdgesOn*), and
// closes them at its cleanup.
type edgeStores = sagatest.Factory

// edgeOnMemory is the memory store and consumer store.
func edgeOnMemory(t *testing.T) sagatest.Stores {
	s := memory.New()
	t.Cleanup(func() { _ = s.Close() })
	return sagatest.Stores{Events: s, Consumers: memory.NewConsumers()}
}

// sibling returns other code on g's store, checkpoints and clock. Without
// charges, its registry does not know edgeCharge (the command type was
// removed), and its saga sends only edgeNotify.
func (g *edgeRig) sibling(t *testing.T, hooks edgeHooks, withoutCharges bool) *edgeRig {
	s := &edgeRig{store: g.store, cps: g.cps, clock: g.clock}
	s.build(t, hooks, withoutCharges)
	return s
}

func (g *edgeRig) build(t *testing.T, hooks edgeHooks, withoutCharges bool) {
	g.reg = codec.NewRegistry(codec.Options{})
	regs := []error{
		codec.Register[edgeState](g.reg, "edge.state", max(hooks.stateVersion, 1)),
		codec.Register[edgeEvent](g.reg, cmp.Or(hooks.eventName, "edge.event"), max(hooks.eventVersion, 1)),
		codec.Register[edgeAny](g.reg, "edge.any", 1),
		codec.Register[edgeDue](g.reg, "edge.due", 1),
		codec.Register[edgeNotify](g.reg, "edge.notify", 1),
		codec.Register[edgeCharged](g.reg, "edge.charged", 1),
		codec.Register[edgeNotified](g.reg, "edge.notified", 1),
		codec.RegisterError(g.reg, "edge.declined", errEdgeDeclined),
	}
	if !withoutCharges {
		regs = append(regs, codec.Register[edgeCharge](g.reg, "edge.charge", 1))
	}
	if hooks.renamedFrom != "" {
		regs = append(regs, g.reg.Upcast(upcast.Rename(hooks.renamedFrom, 1, hooks.eventName, max(hooks.eventVersion, 1))))
	}
	for _, err := range regs {
		require.NoError(t, err)
	}
	typ, err := saga.New[edgeState]("edge", g.reg, saga.Options[edgeState]{})
	require.NoError(t, err)
	event := hooks.event
	if event == nil {
		event = func(_ context.Context, s *edgeState, e edgeEvent, _ *saga.Output) error {
			s.Seen = append(s.Seen, e.Text)
			return nil
		}
	}
	require.NoError(t, saga.On(typ, saga.Event[edgeState, edgeEvent]{Starts: true,
		Instance: func(e edgeEvent, _ eventstore.Metadata) string { return e.ID }, Handle: event}))
	require.NoError(t, saga.On(typ, saga.Event[edgeState, edgeAny]{AnyOrder: true,
		Instance: func(e edgeAny, _ eventstore.Metadata) string { return e.ID },
		Handle: func(_ context.Context, s *edgeState, e edgeAny, _ *saga.Output) error {
			s.Seen = append(s.Seen, e.Text)
			return nil
		}}))
	for _, name := range edgeDeadlines {
		require.NoError(t, saga.OnDeadline(typ, name, func(ctx context.Context, s *edgeState, p edgeDue, out *saga.Output) error {
			if hooks.deadline != nil {
				return hooks.deadline(ctx, name, s, p, out)
			}
			s.Seen = append(s.Seen, "due:"+p.Text)
			return nil
		}))
	}
	rejected := hooks.rejected
	if rejected == nil {
		rejected = func(_ context.Context, s *edgeState, ref string, _ error, _ *saga.Output) error {
			s.Seen = append(s.Seen, "rejected:"+ref)
			return nil
		}
	}
	require.NoError(t, saga.OnRejected(typ, func(ctx context.Context, s *edgeState, c edgeNotify, reason error, out *saga.Output) error {
		return rejected(ctx, s, c.Ref, reason, out)
	}))
	if !withoutCharges {
		require.NoError(t, saga.OnRejected(typ, func(ctx context.Context, s *edgeState, c edgeCharge, reason error, out *saga.Output) error {
			return rejected(ctx, s, c.Ref, reason, out)
		}))
	}
	g.typ = typ

	accounts, err := aggregate.NewType[edgeAccount]("acct", aggregate.Options[edgeAccount]{})
	require.NoError(t, err)
	g.bus = command.New(g.store, g.reg, command.Options{})
	require.NoError(t, command.Route[edgeNotify](g.bus, accounts))
	if !withoutCharges {
		require.NoError(t, command.Route[edgeCharge](g.bus, accounts))
	}
	g.accounts, err = aggregate.NewRepository(g.store, g.reg, accounts, aggregate.RepositoryOptions{})
	require.NoError(t, err)
}

// runner returns a new runner (another process) of the rig's code on store
// (nil: the rig's memory store), with the rig's bus, clock and checkpoints
// unless opts names others, one attempt per message and no waits between
// retries.
func (g *edgeRig) runner(t *testing.T, store eventstore.Store, opts saga.RunnerOptions) *saga.Runner[edgeState] {
	t.Helper()
	if store == nil {
		store = g.store
	}
	if opts.Clock == nil {
		opts.Clock = g.clock
	}
	if opts.Checkpoints == nil {
		opts.Checkpoints = g.cps
	}
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	if opts.Attempts == 0 {
		opts.Attempts = 1
	}
	if opts.Retry == (backoff.Policy{}) {
		opts.Retry = backoff.Policy{Initial: time.Microsecond, Max: time.Microsecond}
	}
	r, err := saga.NewRunner(g.typ, store, g.bus, opts)
	require.NoError(t, err)
	return r
}

// put stores ev at the end of stream and returns it as stored.
func (g *edgeRig) put(t *testing.T, stream string, ev any) eventstore.Event {
	t.Helper()
	data, err := g.reg.Encode(ev)
	require.NoError(t, err)
	res, err := g.store.Append(context.Background(), stream, eventstore.Any, data)
	require.NoError(t, err)
	for e, err := range g.store.ReadStream(context.Background(), stream, eventstore.Forward(res.LastVersion)) {
		require.NoError(t, err)
		return e
	}
	t.Fatalf("the event appended to %s is not there", stream)
	return eventstore.Event{}
}

// account returns the edgeAccount id as its stream has it.
func (g *edgeRig) account(t *testing.T, id string) *edgeAccount {
	t.Helper()
	inst, err := g.accounts.Load(context.Background(), id)
	require.NoError(t, err)
	if inst.State.Charges == nil {
		inst.State.Charges, inst.State.Notices = map[string]int{}, map[string]int{}
	}
	return inst.State
}

func edgeDeliver(t *testing.T, r *saga.Runner[edgeState], source string, seq uint64, ev any) saga.Outcome {
	t.Helper()
	out, err := r.Deliver(context.Background(), saga.Delivery{Source: source, Sequence: seq, Event: ev})
	require.NoError(t, err, "delivering #%d of %s", seq, source)
	return out
}

func edgeExplain(t *testing.T, r *saga.Runner[edgeState], id string) saga.Explanation[edgeState] {
	t.Helper()
	x, err := r.Explain(context.Background(), id)
	require.NoError(t, err)
	return x
}

// edgeSeen is what instance id's handlers saw (nil for no state).
func edgeSeen(t *testing.T, r *saga.Runner[edgeState], id string) []string {
	t.Helper()
	x := edgeExplain(t, r, id)
	if x.State == nil {
		return nil
	}
	return x.State.Seen
}

func edgeHistory(t *testing.T, r *saga.Runner[edgeState], id string) []saga.Step {
	t.Helper()
	var out []saga.Step
	for s, err := range r.History(context.Background(), id) {
		require.NoError(t, err)
		out = append(out, s)
	}
	return out
}

func edgeCount(seen []string, what string) int {
	n := 0
	for _, s := range seen {
		if s == what {
			n++
		}
	}
	return n
}

func edgeContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var errEdgeStoreDown = errors.New("edge store: connection lost")

// edgeStore wraps a store to fail an append, or to run something right
// after a read, or in the middle of a read of the log, at a chosen call.
type edgeStore struct {
	eventstore.Store
	mu sync.Mutex
	// failIn maps a stream to how many of its appends go through before
	// one fails (once).
	failIn   map[string]int
	failures atomic.Int32
	// afterRead maps a stream to what to run once, when the next read of
	// it ends (after its reader has taken what it wanted).
	afterRead map[string]func()
	// afterYield maps a stream's event to what to run once, when a read of
	// the log has yielded it (the reader goes on after).
	afterYield map[edgeEventAt]func()
}

// edgeEventAt names a stored event by its stream and version.
type edgeEventAt struct {
	stream  string
	version uint64
}

func newEdgeStore(s eventstore.Store) *edgeStore {
	return &edgeStore{Store: s, failIn: map[string]int{}, afterRead: map[string]func(){}, afterYield: map[edgeEventAt]func(){}}
}

// failAppend makes the append to stream after the next `after` ones fail.
func (s *edgeStore) failAppend(stream string, after int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failIn[stream] = after
}

// onReadAllPast runs fn once, when a read of the log (ReadAll) has
// yielded the event at version of stream: in the middle of a scan.
func (s *edgeStore) onReadAllPast(stream string, version uint64, fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.afterYield[edgeEventAt{stream, version}] = fn
}

func (s *edgeStore) ReadAll(ctx context.Context, after eventstore.Position, f eventstore.Filter) iter.Seq2[eventstore.Event, error] {
	inner := s.Store.ReadAll(ctx, after, f)
	return func(yield func(eventstore.Event, error) bool) {
		for ev, err := range inner {
			if !yield(ev, err) {
				return
			}
			if err != nil {
				continue
			}
			at := edgeEventAt{ev.StreamID, ev.Version}
			s.mu.Lock()
			fn := s.afterYield[at]
			delete(s.afterYield, at)
			s.mu.Unlock()
			if fn != nil {
				fn()
			}
		}
	}
}

// onRead runs fn once, when the next read of stream ends.
func (s *edgeStore) onRead(stream string, fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.afterRead[stream] = fn
}

func (s *edgeStore) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	s.mu.Lock()
	if n, ok := s.failIn[stream]; ok {
		if n == 0 {
			delete(s.failIn, stream)
			s.mu.Unlock()
			s.failures.Add(1)
			return eventstore.AppendResult{}, errEdgeStoreDown
		}
		s.failIn[stream] = n - 1
	}
	s.mu.Unlock()
	return s.Store.Append(ctx, stream, expected, events...)
}

func (s *edgeStore) ReadStream(ctx context.Context, stream string, opts eventstore.ReadOptions) iter.Seq2[eventstore.Event, error] {
	inner := s.Store.ReadStream(ctx, stream, opts)
	return func(yield func(eventstore.Event, error) bool) {
		defer func() {
			s.mu.Lock()
			fn := s.afterRead[stream]
			delete(s.afterRead, stream)
			s.mu.Unlock()
			if fn != nil {
				fn()
			}
		}()
		for ev, err := range inner {
			if !yield(ev, err) {
				return
			}
		}
	}
}

// testEdge01AnyOrderMessageDoesNotDropEarlierOnes: case 1. A message of a
// type mapped with AnyOrder moved its source's watermark to its own
// sequence, so the earlier messages of that source, arriving later, were
// dropped as duplicates. Promise (saga.Event.AnyOrder, DESIGN "One
// structure, one job"): an any-order message is handled when it arrives,
// and it drops nothing that was not handled; every message is handled once.
func testEdge01AnyOrderMessageDoesNotDropEarlierOnes(t *testing.T, st edgeStores) {
	g := newEdgeRig(t, st, edgeHooks{})
	r := g.runner(t, nil, saga.RunnerOptions{})
	require.Equal(t, saga.Handled, edgeDeliver(t, r, "start", 0, edgeEvent{ID: "1", Text: "start"}))

	assert.Equal(t, saga.Handled, edgeDeliver(t, r, "feed", 2, edgeAny{ID: "1", Text: "any#2"}), "an any-order message is handled at once")
	assert.Equal(t, saga.Handled, edgeDeliver(t, r, "feed", 0, edgeEvent{ID: "1", Text: "ordered#0"}),
		"#0 of the source was never handled: it is not a duplicate of the any-order #2")
	assert.Equal(t, saga.Handled, edgeDeliver(t, r, "feed", 1, edgeAny{ID: "1", Text: "any#1"}),
		"#1 of the source was never handled: it is not a duplicate of #2")

	seen := edgeSeen(t, r, "1")
	assert.ElementsMatch(t, []string{"start", "any#2", "ordered#0", "any#1"}, seen, "every message of the source handled once")
	for seq, ev := range []any{edgeEvent{ID: "1", Text: "ordered#0"}, edgeAny{ID: "1", Text: "any#1"}, edgeAny{ID: "1", Text: "any#2"}} {
		assert.Equal(t, saga.Duplicate, edgeDeliver(t, r, "feed", uint64(seq), ev), "a redelivery of #%d", seq)
	}
	assert.Len(t, edgeSeen(t, r, "1"), len(seen), "redeliveries change nothing")
}

// testEdge02DeadlineSetBehindAnotherRunnersCheckpointFires: case 2. Two
// runners without leases share their checkpoints: runner A's outbox moved
// the shared checkpoint past a record that set a deadline; runner B, whose
// deadline index was loaded before, started its outbox session after that
// record and never learnt the deadline, so once A stopped it never fired.
// Promise (docs/sagas.md "Without Exclusive every runner runs every
// segment ... it costs work, never correctness"; DESIGN: deadlines are
// durable and fire exactly once): B fires the deadline when it is due.
func testEdge02DeadlineSetBehindAnotherRunnersCheckpointFires(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	g := newEdgeRig(t, st, edgeHooks{event: func(_ context.Context, s *edgeState, e edgeEvent, out *saga.Output) error {
		s.Seen = append(s.Seen, e.Text)
		out.ScheduleAfter("due", 15*time.Minute, edgeDue{Text: e.ID})
		return nil
	}})
	a := g.runner(t, nil, saga.RunnerOptions{})
	b := g.runner(t, nil, saga.RunnerOptions{})
	require.NoError(t, b.CatchUp(ctx), "B starts first: its deadlines are loaded, from an empty store")

	g.put(t, "src-1", edgeEvent{ID: "1", Text: "schedule"})
	require.NoError(t, a.CatchUp(ctx), "A steps the instance, and its outbox moves the shared checkpoint past the step")
	require.Len(t, edgeExplain(t, a, "1").Deadlines, 1, "the deadline is pending")

	// A stops; B goes on alone.
	require.NoError(t, b.CatchUp(ctx))
	g.clock.Advance(16 * time.Minute)
	require.NoError(t, b.CatchUp(ctx))
	fired, err := b.FireDue(ctx)
	require.NoError(t, err)
	t.Logf("B fired %d more after its catch-up", fired)
	x := edgeExplain(t, b, "1")
	assert.Equal(t, []string{"schedule", "due:1"}, x.State.Seen, "the deadline fired, once, though A's outbox passed its record")
	assert.Empty(t, x.Deadlines, "and is no longer pending")
}

// testEdge03HeldEventSurvivesAnInterruptedDrainAfterSkip: case 3. A stored
// event held behind a parked one was dropped as a duplicate when the
// stream's next event was stepped before the drain that follows Skip had
// handled it (here the drain's append failed once, as after a crash or a
// lost connection). Promise (DESIGN "Operator actions ... whatever they
// unblock is crash-safe (a later event of a stream never overtakes a held
// one)"; HandleStored: each event of a stream, in order, at least once):
// the held event is handled, once, before the stream's later one.
func testEdge03HeldEventSurvivesAnInterruptedDrainAfterSkip(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	g := newEdgeRig(t, st, edgeHooks{event: func(_ context.Context, s *edgeState, e edgeEvent, _ *saga.Output) error {
		if e.Text == "poison" {
			return errors.New("the handler fails on poison")
		}
		s.Seen = append(s.Seen, e.Text)
		return nil
	}})
	store := newEdgeStore(g.store)
	r := g.runner(t, store, saga.RunnerOptions{})
	var evs []eventstore.Event
	for _, text := range []string{"start", "poison", "held", "next"} {
		evs = append(evs, g.put(t, "src-1", edgeEvent{ID: "1", Text: text}))
	}
	for i, want := range []saga.Outcome{saga.Handled, saga.Parked, saga.Held} {
		out, err := r.HandleStored(ctx, evs[i])
		require.NoError(t, err)
		require.Equal(t, want, out, "event #%d", i)
	}

	// The operator skips the poison: the skip's step is stored, and the
	// drain's step of the held event then fails to append.
	store.failAppend(g.typ.Stream("1"), 1)
	err := r.Skip(ctx, "1", edgeExplain(t, r, "1").Parked.ID)
	require.EqualValues(t, 1, store.failures.Load(), "the drain's append failed")
	t.Logf("Skip: %v", err)

	// The stream's next event arrives before anything drains the instance.
	out, err := r.HandleStored(ctx, evs[3])
	require.NoError(t, err)
	t.Logf("the next event: %s", out)

	seen := edgeSeen(t, r, "1")
	assert.Equal(t, 1, edgeCount(seen, "held"), "the held event was handled once, not dropped as a duplicate: %v", seen)
	assert.Equal(t, 1, edgeCount(seen, "next"), "the next event was handled once: %v", seen)
	if i, j := slices.Index(seen, "held"), slices.Index(seen, "next"); i >= 0 && j >= 0 {
		assert.Less(t, i, j, "the stream's later event does not overtake the held one")
	}
	assert.Empty(t, edgeExplain(t, r, "1").Held)
}

// testEdge03DrainResumesAfterTheOperatorsProcessStops: the other half of
// case 3. An operator's Skip is stored and the drain that follows it fails
// (the operator's process dies, say), and no later event of the instance
// ever arrives to drain it. Promise (DESIGN "whatever they unblock is
// crash-safe"): the outbox of the production runner, reading the skip's
// record, drains the instance: the held events are handled, once each, in
// their stream's order.
func testEdge03DrainResumesAfterTheOperatorsProcessStops(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	g := newEdgeRig(t, st, edgeHooks{event: func(_ context.Context, s *edgeState, e edgeEvent, _ *saga.Output) error {
		if e.Text == "poison" {
			return errors.New("the handler fails on poison")
		}
		s.Seen = append(s.Seen, e.Text)
		return nil
	}})
	production := g.runner(t, nil, saga.RunnerOptions{})
	var evs []eventstore.Event
	for _, text := range []string{"start", "poison", "held-1", "held-2"} {
		evs = append(evs, g.put(t, "src-1", edgeEvent{ID: "1", Text: text}))
	}
	require.NoError(t, production.CatchUp(ctx))
	x := edgeExplain(t, production, "1")
	require.NotNil(t, x.Parked)
	require.Equal(t, map[string]uint64{"src-1": 1}, x.Pending, "the held events wait in their stream")
	for _, ev := range evs[2:] {
		out, err := production.HandleStored(ctx, ev)
		require.NoError(t, err)
		assert.Equal(t, saga.Duplicate, out, "a held event delivered again waits already: nothing is stored")
	}
	assert.Equal(t, x.Version, edgeExplain(t, production, "1").Version)

	failing := newEdgeStore(g.store)
	operator := g.runner(t, failing, saga.RunnerOptions{})
	failing.failAppend(g.typ.Stream("1"), 1) // the skip is stored, the drain's first step is not
	require.Error(t, operator.Skip(ctx, "1", x.Parked.ID))

	require.NoError(t, production.CatchUp(ctx), "the outbox reads the skip's record")
	x = edgeExplain(t, production, "1")
	assert.Equal(t, []string{"start", "held-1", "held-2"}, x.State.Seen)
	assert.Empty(t, x.Pending, "nothing waits any more")
	assert.Nil(t, x.Parked)
}

// testEdge04RedriveKeepsARejectionOfACommandSentBeforeFrom: case 4.
// Redrive set the instance back to the step before from, which had not
// taken the rejection of a command sent before from; that command is never
// sent again (the outbox passed its step), so the rejection was lost for
// good. Promise (Runner.Redrive: "A recorded rejection comes back through
// the outbox and is fed to the instance again"; DESIGN: a rejection is fed
// back once): after the re-drive and the outbox, the rejection's handler
// has run in the re-driven history, and its effect is in the state once.
func testEdge04RedriveKeepsARejectionOfACommandSentBeforeFrom(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	g, rejections := rejectingRig(t, st, "reject-4", func(string) bool { return true })
	r := g.runner(t, nil, saga.RunnerOptions{})
	edgeDeliver(t, r, "src-1", 0, edgeEvent{ID: "1", Text: "start"})
	require.NoError(t, r.CatchUp(ctx), "the outbox sends the charge, which is rejected and fed back")
	require.Equal(t, []string{"start", "rejected:c"}, edgeSeen(t, r, "1"))
	var from uint64
	found := false
	for _, s := range edgeHistory(t, r, "1") {
		if s.Kind == "rejected" {
			from, found = s.Version, true
		}
	}
	require.True(t, found, "a rejection step")
	require.NotZero(t, from, "the command was sent at a step before the rejection's")

	_, err := r.Redrive(ctx, "1", from)
	require.NoError(t, err)
	require.NoError(t, r.CatchUp(ctx))

	assert.Equal(t, []string{"start", "rejected:c"}, edgeSeen(t, r, "1"),
		"the re-driven instance took the rejection again: its compensation is not lost")
	assert.EqualValues(t, 2, rejections.Load(), "the rejection handler ran in the first history and in the re-driven one")
	assert.Zero(t, g.account(t, "reject-4").Charges["c"], "the rejected charge never applied")
}

// rejectingRig is an edge rig whose events that charges picks (by their
// text) charge account, which rejects them (its ID starts with "reject"):
// the instance records each event's text and each rejection, which it
// counts.
func rejectingRig(t *testing.T, st edgeStores, account string, charges func(text string) bool) (*edgeRig, *atomic.Int32) {
	rejections := &atomic.Int32{}
	g := newEdgeRig(t, st, edgeHooks{
		event: func(_ context.Context, s *edgeState, e edgeEvent, out *saga.Output) error {
			s.Seen = append(s.Seen, e.Text)
			if charges(e.Text) {
				out.Send(edgeCharge{Account: account, Ref: "c"})
			}
			return nil
		},
		rejected: func(_ context.Context, s *edgeState, ref string, _ error, _ *saga.Output) error {
			rejections.Add(1)
			s.Seen = append(s.Seen, "rejected:"+ref)
			return nil
		},
	})
	return g, rejections
}

// testEdge05RejectionOfAnEarlierCommandAfterALaterOneIsHandled: case 5.
// Rejections were deduplicated by one highest-seen number, so the
// rejection of an earlier command, fed back after a later one's, was a
// Duplicate and its handler never ran. Promise (Runner.Reject: "the
// instance's OnRejected handler runs once"; DESIGN "rejections (per
// command)"): each command's rejection is handled once, in any order.
func testEdge05RejectionOfAnEarlierCommandAfterALaterOneIsHandled(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	g := newEdgeRig(t, st, edgeHooks{event: func(_ context.Context, s *edgeState, e edgeEvent, out *saga.Output) error {
		s.Seen = append(s.Seen, e.Text)
		out.Send(edgeCharge{Account: "acct5", Ref: e.Text})
		return nil
	}})
	r := g.runner(t, nil, saga.RunnerOptions{})
	edgeDeliver(t, r, "src-1", 0, edgeEvent{ID: "1", Text: "first"})
	edgeDeliver(t, r, "src-1", 1, edgeEvent{ID: "1", Text: "second"})
	ids := map[string]string{}
	for _, s := range edgeHistory(t, r, "1") {
		for _, c := range s.Commands {
			ids[c.Command.(edgeCharge).Ref] = c.ID
		}
	}
	require.Len(t, ids, 2)

	out, err := r.Reject(ctx, "1", ids["second"], errors.New("declined"))
	require.NoError(t, err)
	assert.Equal(t, saga.Handled, out, "the later command's rejection")
	out, err = r.Reject(ctx, "1", ids["first"], errors.New("declined"))
	require.NoError(t, err)
	assert.Equal(t, saga.Handled, out, "the earlier command's rejection is not a duplicate of the later one's")

	seen := edgeSeen(t, r, "1")
	assert.Equal(t, 1, edgeCount(seen, "rejected:second"), "seen: %v", seen)
	assert.Equal(t, 1, edgeCount(seen, "rejected:first"), "both compensations ran: %v", seen)
	out, err = r.Reject(ctx, "1", ids["first"], errors.New("declined"))
	require.NoError(t, err)
	assert.Equal(t, saga.Duplicate, out, "a second rejection of one command is the duplicate")
}

// testEdge06ConcurrentOperatorsDoNotLoseTheNextParkedMessage: case 6. Two
// operators act on the same parked message P at once; the first one
// retries it, P succeeds, and the held message Q runs, fails and is
// parked; the second one, acting on the P it saw, un-parked Q (Retry: P is
// a duplicate now, and its step clears the parked message) or skipped Q
// (Skip: its append lost to the first operator's steps, and the reload
// skipped whatever was parked then). Q was then neither parked, held nor
// handled. Promise (DESIGN "Operator actions are conditional on what the
// operator saw"): Q stays parked (or is handled); it is never dropped by an
// action meant for P.
//
// Both operators saw P parked (Explain) and name it; a store wrapper runs
// the first operator's whole Retry right after the second one's call has
// read the instance, deterministically, as a race between two operator
// processes would. The second one's action must then be refused as stale.
// (Written at first against the API that named only the instance.)
func testEdge06ConcurrentOperatorsDoNotLoseTheNextParkedMessage(t *testing.T, st edgeStores) {
	for _, op := range []string{"Retry", "Skip"} {
		t.Run(op, func(t *testing.T) {
			ctx := edgeContext(t)
			var fixed atomic.Bool
			g := newEdgeRig(t, st, edgeHooks{event: func(_ context.Context, s *edgeState, e edgeEvent, _ *saga.Output) error {
				switch {
				case e.Text == "P" && !fixed.Load():
					return errors.New("P fails until it is fixed")
				case e.Text == "Q":
					return errors.New("Q always fails")
				}
				s.Seen = append(s.Seen, e.Text)
				return nil
			}})
			first := g.runner(t, nil, saga.RunnerOptions{})
			racing := newEdgeStore(g.store)
			second := g.runner(t, racing, saga.RunnerOptions{CacheSize: -1})
			require.Equal(t, saga.Handled, edgeDeliver(t, first, "s", 0, edgeEvent{ID: "1", Text: "start"}))
			require.Equal(t, saga.Parked, edgeDeliver(t, first, "s", 1, edgeEvent{ID: "1", Text: "P"}))
			require.Equal(t, saga.Held, edgeDeliver(t, first, "s", 2, edgeEvent{ID: "1", Text: "Q"}))
			fixed.Store(true)
			p := edgeExplain(t, second, "1").Parked
			require.NotNil(t, p, "both operators see P parked")

			ran := false
			racing.onRead(g.typ.Stream("1"), func() {
				// The second operator has read the instance with P parked; the
				// first one's Retry runs to its end now.
				ran = true
				out, err := first.Retry(ctx, "1", p.ID)
				require.NoError(t, err)
				require.Equal(t, saga.Handled, out, "the first operator's retry of P succeeds")
				x := edgeExplain(t, first, "1")
				require.NotNil(t, x.Parked, "Q failed after P was resolved, and is parked")
				require.Equal(t, uint64(2), x.Parked.Sequence)
			})
			var err error
			if op == "Retry" {
				_, err = second.Retry(ctx, "1", p.ID)
			} else {
				err = second.Skip(ctx, "1", p.ID)
			}
			require.True(t, ran, "the first operator acted between the second one's read and its step")
			t.Logf("the second operator's %s: %v", op, err)
			assert.ErrorIs(t, err, saga.ErrStale, "the second operator acted on a P that is no longer parked")

			x := edgeExplain(t, first, "1")
			t.Logf("the last step: %s of #%d of %q", x.LastStep.Kind, x.LastStep.Sequence, x.LastStep.Source)
			qParked := x.Parked != nil && x.Parked.Source == "s" && x.Parked.Sequence == 2
			qHeld := slices.ContainsFunc(x.Held, func(h saga.HeldMessage) bool { return h.Source == "s" && h.Sequence == 2 })
			assert.True(t, qParked || qHeld || slices.Contains(x.State.Seen, "Q"),
				"Q is still parked, held or handled, not lost: parked %+v, held %+v, seen %v", x.Parked, x.Held, x.State.Seen)
		})
	}
}

// testEdge07RejectionOfACommandSentByTheCompletingStepIsHandled: case 7. A
// step that sends a command and completes the instance never saw that
// command's rejection: the instance, complete, ignored it, so OnRejected
// did not run and the compensation was lost. Promise (OnRejected: "The
// rejection reaches the instance exactly once, as a step ... This is where
// compensation starts"; DESIGN: a rejection is fed back once): the
// compensation handler runs exactly once.
func testEdge07RejectionOfACommandSentByTheCompletingStepIsHandled(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	var compensations atomic.Int32
	g := newEdgeRig(t, st, edgeHooks{
		event: func(_ context.Context, s *edgeState, e edgeEvent, out *saga.Output) error {
			s.Seen = append(s.Seen, e.Text)
			out.Send(edgeCharge{Account: "reject-7", Ref: "final"})
			out.Complete()
			return nil
		},
		rejected: func(_ context.Context, s *edgeState, ref string, _ error, _ *saga.Output) error {
			compensations.Add(1)
			s.Seen = append(s.Seen, "rejected:"+ref)
			return nil
		},
	})
	r := g.runner(t, nil, saga.RunnerOptions{})
	edgeDeliver(t, r, "src-1", 0, edgeEvent{ID: "1", Text: "finish"})
	require.NoError(t, r.CatchUp(ctx), "the outbox sends the charge; the account rejects it")
	require.NoError(t, r.CatchUp(ctx))
	assert.EqualValues(t, 1, compensations.Load(), "the rejection of the completing step's command reached OnRejected once")
}
