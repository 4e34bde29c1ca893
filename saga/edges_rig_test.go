package saga_test

// The set-up that the edge tests (saga/*edges*_test.go) share: a small saga
// type "edge" whose handlers each test chooses, an aggregate that its
// commands go to, and store wrappers that fail or race at a chosen call.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
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

// decide refuses or panics by the account named in the command, and
// otherwise records event.
func (a *edgeAccount) decide(account string, event any) ([]any, error) {
	switch {
	case strings.HasPrefix(account, "reject"):
		return nil, fmt.Errorf("account %s: %w", account, errEdgeDeclined)
	case strings.HasPrefix(account, "panic"):
		panic("the edge account panics")
	}
	return []any{event}, nil
}

func (a *edgeAccount) charge(_ context.Context, c edgeCharge) ([]any, error) {
	return a.decide(c.Account, edgeCharged(c))
}

func (a *edgeAccount) notify(_ context.Context, c edgeNotify) ([]any, error) {
	return a.decide(c.Account, edgeNotified(c))
}

func (a *edgeAccount) init() {
	if a.Charges == nil {
		a.Charges, a.Notices = map[string]int{}, map[string]int{}
	}
}

func (a *edgeAccount) charged(e edgeCharged) { a.init(); a.Charges[e.Ref]++ }

func (a *edgeAccount) notified(e edgeNotified) { a.init(); a.Notices[e.Ref]++ }

// edgeAccountBindings bind the edge saga's commands and events to an
// edgeAccount's methods.
var edgeAccountBindings = []aggregate.Binding[edgeAccount]{
	aggregate.Handles((*edgeAccount).charge),
	aggregate.Handles((*edgeAccount).notify),
	aggregate.Applies((*edgeAccount).charged),
	aggregate.Applies((*edgeAccount).notified),
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
func edgeOnMemory(t testing.TB) sagatest.Stores {
	s := memory.New()
	t.Cleanup(func() { _ = s.Close() })
	return sagatest.Stores{Events: s, Consumers: memory.New()}
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

	accounts, err := aggregate.NewType[edgeAccount]("acct", aggregate.Options[edgeAccount]{}, edgeAccountBindings...)
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
	if opts.Retry.Initial == 0 && opts.Retry.Max == 0 {
		opts.Retry.Initial, opts.Retry.Max = time.Microsecond, time.Microsecond
	}
	if opts.Retry.Attempts == 0 {
		opts.Retry.Attempts = 1
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
