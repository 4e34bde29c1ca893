package main

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/telemetry"
	"github.com/cairn-es/cairn/internal/testrig/oteltest"
	"github.com/cairn-es/cairn/internal/testrig/pgtest"
	"github.com/cairn-es/cairn/internal/tools/tracepic/waterfall"
	"github.com/cairn-es/cairn/saga"
)

// The end-to-end test of issue 27: the example, traced, its sale in a
// child process that is SIGKILLed once and restarted, yields for each
// order one connected picture from the commands that placed and paid it
// to the one that ended it, across the process boundary, the crash and
// the redeliveries that followed. The test process (the example's parent)
// records its spans in memory; each sale process writes its own file,
// which the test merges in.
func TestTraceOfEveryOrderOnSQLite(t *testing.T) {
	checkTraces(t, "")
}

func TestTraceOfEveryOrderOnPostgreSQL(t *testing.T) {
	server := pgtest.ForTest(t, pgtest.Options{})
	u, err := url.Parse(server.URL)
	require.NoError(t, err)
	q := u.Query()
	q.Set("schema", server.TempSchema(t, "reservation"))
	u.RawQuery = q.Encode()
	checkTraces(t, u.String())
}

// forgetEnv makes the first sale process of a run lose every checkpoint
// it saves (see forgetful): everything it did is delivered again to the
// process started after the kill, whenever the kill comes.
const forgetEnv = "RESERVATION_TEST_FORGET_CHECKPOINTS"

func init() {
	if os.Getenv(forgetEnv) != "1" {
		return
	}
	saleFault = func(cfg saleConfig, store eventstore.Store, opts *saga.RunnerOptions) {
		if cfg.Role != "sale #1" {
			return
		}
		opts.Checkpoints = &forgetful{CheckpointStore: store.(storekit.CheckpointStore), saved: map[string]storekit.Checkpoint{}}
		opts.DeadLetters, _ = store.(storekit.DeadLetterStore)
	}
}

// forgetful is a checkpoint store whose saves never reach the store: the
// process sees its own checkpoints, the next process sees none of them, as
// if every save had been lost in a crash.
type forgetful struct {
	storekit.CheckpointStore
	mu    sync.Mutex
	saved map[string]storekit.Checkpoint
}

func (f *forgetful) Checkpoint(ctx context.Context, name string) (storekit.Checkpoint, error) {
	f.mu.Lock()
	cp, ok := f.saved[name]
	f.mu.Unlock()
	if ok {
		return cp, nil
	}
	return f.CheckpointStore.Checkpoint(ctx, name)
}

func (f *forgetful) SaveCheckpoint(_ context.Context, name string, _, next eventstore.Position, fence storekit.Fence) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.saved[name] = storekit.Checkpoint{Position: next, Fence: fence}
	return nil
}

func checkTraces(t *testing.T, storeURL string) {
	ctx := context.Background()
	dir := t.TempDir()
	rec := oteltest.New(t)
	t.Setenv(forgetEnv, "1") // for the sale processes this test starts
	cfg := testConfig(t, dir, modelV1, 20, 27)
	// Orders still arrive when the sale process is killed (once half the
	// clients' messages took effect), so that it dies busy.
	cfg.clients, cfg.pace = 2, 30*time.Millisecond
	cfg.store = storeURL
	cfg.trace = filepath.Join(dir, "trace", "reservation.jsonl")
	cfg.tracerProvider, cfg.meterProvider = rec.TracerProvider, rec.MeterProvider
	res, err := run(ctx, cfg)
	require.NoError(t, err)
	require.GreaterOrEqual(t, res.killedAt, 0, "the sale process was killed once")

	// The parent's bus counted the queue's deliveries by outcome, as the
	// queue itself did.
	rm := rec.Collect(t)
	outcomes := func(outcome string) int64 {
		return sumInt64(rm, "cairn.commands", telemetry.OutcomeKey.String(outcome))
	}
	q := res.queue
	assert.EqualValues(t, q.Applied, outcomes("handled")+outcomes("noop"), "commands that took effect")
	assert.EqualValues(t, q.Duplicates, outcomes("duplicate"), "redeliveries absorbed")
	assert.EqualValues(t, q.PutBack, outcomes("conflicted"), "races lost too often")
	assert.EqualValues(t, q.Refused, outcomes("rejected"))
	assert.Zero(t, outcomes("failed"))
	assert.EqualValues(t, q.Deliveries, sumInt64(rm, "cairn.commands"), "one per delivery")

	killed, cutLines, err := waterfall.ReadFiles(salePath(cfg.trace, 1))
	require.NoError(t, err)
	assert.LessOrEqual(t, cutLines, 1, "the killed process cut its last line at most")
	restarted, skipped, err := waterfall.ReadFiles(salePath(cfg.trace, 2))
	require.NoError(t, err)
	assert.Zero(t, skipped, "the restarted sale process ended cleanly: no cut line")
	require.NotEmpty(t, killed)
	require.NotEmpty(t, restarted)
	tr := newTraced(waterfall.FromSDK(rec.Ended()), killed, restarted)

	// No orphans, in any process. A process killed with SIGKILL never
	// ends the spans it was in (the step, the send the kill interrupted),
	// but the sale processes write each span as it starts too, so the
	// children those spans ended before the kill (an append, a dispatch)
	// have their parent, unfinished, and the picture does not break where
	// the crash was.
	for _, o := range oteltest.Orphans(waterfall.SDK(tr.all)) {
		assert.Fail(t, "an orphan span", "%s in %s: its parent %s was never recorded", o.Name(), tr.proc[o.SpanContext().SpanID()], o.Parent().SpanID())
	}
	for _, s := range tr.all {
		if s.Unfinished() {
			assert.Equal(t, "sale #1", tr.proc[s.ID()], "%s never ended outside the killed process", s.Name)
		}
	}

	svc, err := openService(ctx, dir, storeURL, modelV1)
	require.NoError(t, err)
	defer svc.close()

	// Every order: what its commands from outside caused reaches the
	// append that ended it (the context its order's last event records),
	// across the parent and the sale processes. Steps, sends and appends
	// take their links and attributes at their start, so even a span the
	// kill interrupted keeps an order connected; what can still cut one is
	// a span the kill came before, or a dispatch's children it never
	// started. Such an order must end under a span that never ended, in
	// the killed process; the others, most of them, whole.
	cut := map[string]bool{}
	crossedKill := 0
	for _, o := range res.orders {
		var roots []trace.SpanID
		for _, r := range waterfall.Roots(tr.all, waterfall.OfAggregate(o.ID)) {
			roots = append(roots, r.ID())
		}
		require.NotEmpty(t, roots, "order %s: no dispatch from outside", o.ID)
		picture := waterfall.Picture(tr.all, roots...)
		endCtx := storedContext(t, ctx, svc.store, "order-"+o.ID, 1)
		end, ok := tr.byID[endCtx.SpanID()]
		require.True(t, ok, "order %s: the append that ended it, whose context its last event records, was recorded", o.ID)
		require.Equal(t, "append order", end.Name)
		if !slices.ContainsFunc(picture, func(s waterfall.Span) bool { return s.ID() == end.ID() }) {
			cut[o.ID] = true
			if !assert.True(t, tr.underKill(end), "order %s (%s): its picture of %d spans does not reach the append that ended it, and the kill did not cut it", o.ID, expect(o), len(picture)) {
				t.Logf("order %s: the append that ended it, and its ancestors:%s", o.ID, tr.ancestry(end))
			}
			continue
		}
		procs := map[string]bool{}
		for _, s := range picture {
			procs[tr.proc[s.ID()]] = true
		}
		assert.True(t, procs["parent"] && (procs["sale #1"] || procs["sale #2"]), "order %s: its picture crosses into a sale process: %v", o.ID, procs)
		if procs["sale #1"] && procs["sale #2"] {
			crossedKill++
		}
	}
	whole := len(res.orders) - len(cut)
	t.Logf("%d orders whole from their first command to their end, %d of them across the kill; %d cut by the kill", whole, crossedKill, len(res.orders)-whole)
	assert.GreaterOrEqual(t, whole, len(res.orders)/2, "most orders are whole")
	assert.Positive(t, crossedKill, "an order whole across the kill and the restart")

	// Every confirmed order's chain, span by span.
	tr.checkChain(t, ctx, svc.store, res.orders, cut)
	// The crash: what the restarted process took up again links to the
	// origin the killed one had linked to.
	crossed := tr.checkRedelivery(t, ctx, svc.store)
	t.Logf("%d spans: %d in the parent, %d in the killed sale process, %d in the restarted one; %d messages or commands taken up again after the crash",
		len(tr.all), len(tr.parent), len(tr.killed), len(tr.restarted), crossed)
	assert.Positive(t, crossed, "a message or command that the killed process had taken up was taken up again after the restart")
}

// hop is one step along an order's chain: the span called name that is a
// child of the current one, or (link) that links to it.
type hop struct {
	name string
	kind trace.SpanKind
	link bool
}

// The two chains a confirmed order's trace can take, each from a command
// sent from outside: the payment was authorized before the sale asked for
// it, so the sale's make-payment accepted it and the confirmation follows
// from the order's placement alone; or the authorization came after, and
// the confirmation follows from it.
var (
	toAppend = func(name string) hop { return hop{name, trace.SpanKindClient, false} }
	viaSaga  = func(command, appendTo string) []hop {
		return []hop{
			{"step sale", trace.SpanKindInternal, true},
			toAppend("append saga:sale"),
			{"send " + command, trace.SpanKindProducer, true},
			{"dispatch " + command, trace.SpanKindInternal, false},
			toAppend("append " + appendTo),
		}
	}
	placedToConfirmed = slices.Concat([]hop{toAppend("append order")},
		viaSaga("sale.make-reservation", "seats"), viaSaga("sale.make-payment", "payment"), viaSaga("sale.confirm-order", "order"))
	authorizedToConfirmed = slices.Concat([]hop{toAppend("append payment")}, viaSaga("sale.confirm-order", "order"))
)

// checkChain follows every confirmed order from a command sent from
// outside to its confirmation, span by span: the command, its append
// (whose context the stored events record), the sale's step linked to it,
// the step's record, the outbox's send linked to the record, the next
// command as the send's child, and so on. Each span has the name and kind
// the hop says, and each link points at the context stored with the data
// it came from. Both chains must have been seen.
func (tr *traced) checkChain(t *testing.T, ctx context.Context, store eventstore.Store, orders []order, cut map[string]bool) {
	t.Helper()
	seen := map[string]int{}
	for _, o := range orders {
		if expect(o).Status != "confirmed" || cut[o.ID] {
			continue
		}
		var found []string
		for _, c := range []struct {
			name   string
			stream string
			hops   []hop
		}{
			{"placed", "order-" + o.ID, placedToConfirmed},
			{"authorized", "payment-" + o.ID, authorizedToConfirmed},
		} {
			for _, root := range waterfall.Roots(tr.all, waterfall.OnStream(c.stream)) {
				if attr(root, "cairn.outcome") != "handled" {
					continue // a redelivered command, absorbed
				}
				if chain, ok := tr.follow(root, c.hops); ok {
					tr.checkLinks(t, ctx, store, o.ID, chain)
					found = append(found, c.name)
					seen[c.name]++
				}
			}
		}
		if !assert.Len(t, found, 1, "order %s: one chain from outside to its confirmation, found %v", o.ID, found) {
			for _, root := range waterfall.Roots(tr.all, waterfall.OfAggregate(o.ID)) {
				t.Logf("order %s: from %s (%s): %s", o.ID, root.Name, attr(root, "cairn.outcome"), tr.describe(root, 0))
			}
		}
	}
	assert.Positive(t, seen["placed"], "an order confirmed from its placement alone")
	t.Logf("confirmed orders by chain: %v", seen)
}

// checkLinks checks one order's chain in detail: each append's context is
// the one its stored event (or step record) records, each step links to
// exactly that context and names the order's instance and the event's
// stream and version, each send links to the record's context and the
// dispatch under it is its child.
func (tr *traced) checkLinks(t *testing.T, ctx context.Context, store eventstore.Store, id string, chain []waterfall.Span) {
	t.Helper()
	assert.Equal(t, "parent", tr.proc[chain[0].ID()], "the chain starts in the process the clients' commands reach")
	for i, s := range chain {
		switch {
		case strings.HasPrefix(s.Name, "append "):
			stream, version := attr(s, "cairn.stream"), attr(s, "cairn.version")
			require.NotEmpty(t, stream, s.Name)
			assert.Equal(t, chain[i-1].ID(), s.Parent.SpanID(), "%s: %s is the child of %s", id, s.Name, chain[i-1].Name)
			if s.Unfinished() {
				continue // the kill came as it stored: the version it wrote is only in the store
			}
			v, err := strconv.ParseUint(version, 10, 64)
			require.NoError(t, err, "%s: cairn.version %q", s.Name, version)
			stored := storedContext(t, ctx, store, stream, v)
			assert.Equal(t, s.Context.SpanID(), stored.SpanID(), "%s: %s@%d records the append span's context", id, stream, v)
			assert.Equal(t, s.Context.TraceID(), stored.TraceID())
		case s.Name == "step sale":
			prev := chain[i-1]
			require.Len(t, s.Links, 1, "a step links to its message")
			assert.Equal(t, prev.Context.SpanID(), s.Links[0].SpanID(), "%s: the step links to the append that stored its event", id)
			assert.Equal(t, id, attr(s, "cairn.saga.instance"))
			assert.Equal(t, attr(prev, "cairn.stream"), attr(s, "cairn.saga.source"))
			// What a span learns as it ends (an append's version, a step's
			// outcome) a span the kill interrupted never recorded.
			if !prev.Unfinished() {
				assert.Equal(t, attr(prev, "cairn.version"), attr(s, "cairn.saga.sequence"))
			}
			if !s.Unfinished() {
				assert.Equal(t, "handled", attr(s, "cairn.outcome"))
			}
			if parent, ok := tr.byID[s.Parent.SpanID()]; ok {
				assert.Equal(t, trace.SpanKindConsumer, parent.Kind, "the step runs under its consumer's batch")
				assert.True(t, slices.ContainsFunc(parent.Links, func(l trace.SpanContext) bool { return l.SpanID() == prev.ID() }),
					"%s: the batch links to the append of its event", id)
			} else {
				assert.Equal(t, "sale #1", tr.proc[s.ID()], "%s: only the killed process can lose a step's batch, which the kill interrupted", id)
			}
			assert.NotEqual(t, "parent", tr.proc[s.ID()], "the sale runs in a process of its own")
		case strings.HasPrefix(s.Name, "send "):
			require.Len(t, s.Links, 1, "a send links to the record of its command")
			assert.Equal(t, chain[i-1].ID(), s.Links[0].SpanID(), "%s: %s links to the step record's append", id, s.Name)
			assert.Equal(t, strings.TrimPrefix(s.Name, "send "), attr(s, "messaging.destination.name"))
			assert.Equal(t, id, attr(s, "cairn.saga.instance"))
			assert.NotEmpty(t, attr(s, "cairn.command_id"))
		case strings.HasPrefix(s.Name, "dispatch ") && i > 0 && chain[i-1].Name == s.Name:
			// The command handled, after its duplicate in the chain.
			assert.Equal(t, "duplicate", attr(chain[i-1], "cairn.outcome"))
			assert.Equal(t, attr(chain[i-1], "cairn.command_id"), attr(s, "cairn.command_id"), "%s: the same command", id)
			if !s.Unfinished() {
				assert.Equal(t, "handled", attr(s, "cairn.outcome"))
			}
		case strings.HasPrefix(s.Name, "dispatch ") && i > 0:
			assert.Equal(t, chain[i-1].ID(), s.Parent.SpanID(), "%s: the outbox's dispatch is its send's child", id)
			if !chain[i-1].Unfinished() {
				assert.Equal(t, attr(chain[i-1], "cairn.command_id"), attr(s, "cairn.command_id"))
			}
			if i+1 < len(chain) && chain[i+1].Name != s.Name && !s.Unfinished() {
				assert.Equal(t, "handled", attr(s, "cairn.outcome"))
			}
		}
	}
}

// checkRedelivery checks the messages and commands that the killed sale
// process and the restarted one both took up: every step of one message
// (instance, source stream, sequence), in either process, links to the
// context its stored event records, and every send of one command ID
// links to one record's context, so a redelivery after the crash links to
// the same origin. At least one of them crossed the crash.
func (tr *traced) checkRedelivery(t *testing.T, ctx context.Context, store eventstore.Store) (crossed int) {
	t.Helper()
	type group struct {
		spans []waterfall.Span
		procs map[string]bool
	}
	groups := map[string]*group{}
	for _, s := range append(slices.Clone(tr.killed), tr.restarted...) {
		var key string
		switch {
		case s.Name == "step sale" && attr(s, "cairn.saga.source") != "":
			key = "step " + attr(s, "cairn.saga.instance") + " " + attr(s, "cairn.saga.source") + "@" + attr(s, "cairn.saga.sequence")
		case strings.HasPrefix(s.Name, "send ") && !s.Unfinished():
			key = "send " + attr(s, "cairn.command_id")
		default:
			continue
		}
		g := groups[key]
		if g == nil {
			g = &group{procs: map[string]bool{}}
			groups[key] = g
		}
		g.spans = append(g.spans, s)
		g.procs[tr.proc[s.ID()]] = true
	}
	for key, g := range groups {
		first := g.spans[0]
		for _, s := range g.spans {
			require.Len(t, s.Links, 1, key)
			assert.Equal(t, first.Links[0].SpanID(), s.Links[0].SpanID(), "%s: each time it was taken up, it links to the same origin", key)
		}
		if strings.HasPrefix(key, "step ") {
			v, err := strconv.ParseUint(attr(first, "cairn.saga.sequence"), 10, 64)
			require.NoError(t, err)
			stored := storedContext(t, ctx, store, attr(first, "cairn.saga.source"), v)
			assert.Equal(t, stored.SpanID(), first.Links[0].SpanID(), "%s: the origin is the context stored with the event", key)
		}
		if g.procs["sale #1"] && g.procs["sale #2"] {
			crossed++
		}
	}
	return crossed
}
