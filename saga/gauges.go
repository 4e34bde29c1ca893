package saga

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/telemetry"
)

// The gauges say what a saga type waits on now, as this runner sees it,
// for an operator to alert on: instances parked, messages held, gaps and
// the oldest one's age, deadlines pending and overdue, commands recorded
// and not yet sent. All but the last are read from the runner's memory
// (its stuck and deadline indexes, which its steps, its outbox and its
// scans of the saga's records keep); the last from the store, bounded
// and cached (see unsentNow).
//
// They are observed while Run runs: Run registers the one callback when it
// starts (once, however many Runs of the runner overlap) and unregisters
// it when it returns, so a runner that is dropped leaves nothing in the
// meter provider. A process that only delivers, or an operator's tool,
// observes none.

// gaugeInstruments are a runner's observable gauges and their options.
type gaugeInstruments struct {
	parked, held, gaps, pending, overdue, unsent metric.Int64ObservableGauge
	gapAge                                       metric.Float64ObservableGauge
	options                                      []metric.ObserveOption
}

func newGaugeInstruments(meter metric.Meter, sagaType attribute.KeyValue) gaugeInstruments {
	g := gaugeInstruments{options: []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(sagaType))}}
	var err error
	for _, i := range []struct {
		to          *metric.Int64ObservableGauge
		name, unit  string
		description string
	}{
		{&g.parked, "cairn.saga.parked", "{instance}", "Instances of a saga parked on a message now."},
		{&g.held, "cairn.saga.held", "{message}", "Deliveries and rejections a saga's instances hold now, behind a gap or a parked message."},
		{&g.gaps, "cairn.saga.gaps", "{gap}", "Gaps a saga's instances wait on now."},
		{&g.pending, "cairn.saga.deadlines.pending", "{deadline}", "Deadlines of a saga pending now."},
		{&g.overdue, "cairn.saga.deadlines.overdue", "{deadline}", "Deadlines of a saga pending and due before now."},
		{&g.unsent, "cairn.saga.outbox.unsent", "{command}", "Commands a saga recorded that its outbox has not sent yet."},
	} {
		*i.to, err = meter.Int64ObservableGauge(i.name, metric.WithUnit(i.unit), metric.WithDescription(i.description))
		telemetry.Unmade("saga", err)
	}
	g.gapAge, err = meter.Float64ObservableGauge("cairn.saga.gap.age", metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest gap a saga's instances wait on (0 for none)."))
	telemetry.Unmade("saga", err)
	return g
}

// gaugeRegistration is the runner's registered callback, shared by the
// Runs that overlap.
type gaugeRegistration struct {
	mu   sync.Mutex
	runs int
	reg  metric.Registration
}

// observeGauges registers the runner's gauge callback for the Run that
// calls it, and returns what that Run calls when it returns.
func (r *Runner[S]) observeGauges() (done func()) {
	g := &r.gaugeReg
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.runs == 0 {
		i := &r.tel.gauges
		reg, err := r.tel.meter.RegisterCallback(r.gaugeCallback, i.parked, i.held, i.gaps, i.gapAge, i.pending, i.overdue, i.unsent)
		if err != nil {
			telemetry.Unmade("saga", err)
			return func() {}
		}
		g.reg = reg
	}
	g.runs++
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.runs--; g.runs == 0 {
			if err := g.reg.Unregister(); err != nil {
				telemetry.Unmade("saga", err)
			}
			g.reg = nil
		}
	}
}

// gaugeCallback observes the gauges: from memory, but for the unsent
// commands (see unsentNow).
func (r *Runner[S]) gaugeCallback(ctx context.Context, o metric.Observer) error {
	i := &r.tel.gauges
	now := r.e.now()
	parked, held, gaps, oldest := r.stuck.counts()
	o.ObserveInt64(i.parked, int64(parked), i.options...)
	o.ObserveInt64(i.held, int64(held), i.options...)
	o.ObserveInt64(i.gaps, int64(gaps), i.options...)
	age := 0.0
	if gaps > 0 {
		age = max(now.Sub(oldest).Seconds(), 0)
	}
	o.ObserveFloat64(i.gapAge, age, i.options...)
	pending, overdue := r.timers.due(now)
	o.ObserveInt64(i.pending, int64(pending), i.options...)
	o.ObserveInt64(i.overdue, int64(overdue), i.options...)
	if n, ok := r.unsentNow(ctx); ok {
		o.ObserveInt64(i.unsent, n, i.options...)
	}
	return nil
}

// The bounds of the read behind cairn.saga.outbox.unsent.
const (
	// defaultUnsentRefresh is how long a count of the unsent commands is
	// reported before the store is read again.
	defaultUnsentRefresh = 10 * time.Second
	// maxUnsentRecords bounds the step records one count reads: past
	// them, the gauge reports what it counted, a lower bound.
	maxUnsentRecords = 10_000
	// unsentReadTimeout bounds the time one count takes: one that runs
	// out reports the previous count.
	unsentReadTimeout = 2 * time.Second
)

// unsentCount is the latest count of the unsent commands.
type unsentCount struct {
	mu      sync.Mutex
	at      time.Time
	n       int64
	known   bool
	refresh time.Duration
}

// unsentNow returns the commands recorded in the step records that the
// outboxes of the segments this runner runs have not passed yet: the
// records after each outbox's stored checkpoint. Reading the store makes
// it right whichever process recorded the commands (this one, one that
// stopped since, another runner); the read is bounded (maxUnsentRecords,
// unsentReadTimeout) and its count kept for a refresh interval. A record
// the outbox is sending counts all its commands until its checkpoint
// passes it; a command of it an operator skipped still counts. ok is
// false while nothing was counted yet (Run has not assigned its
// segments, or the store failed).
func (r *Runner[S]) unsentNow(ctx context.Context) (int64, bool) {
	c := &r.unsentCount
	c.mu.Lock()
	defer c.mu.Unlock()
	refresh := c.refresh
	if refresh == 0 {
		refresh = defaultUnsentRefresh
	}
	// A count, or a failed read, holds for the refresh interval: a store
	// that is down is not asked again at every collection. A negative
	// refresh reads every time.
	if !c.at.IsZero() && time.Since(c.at) < refresh {
		return c.n, c.known
	}
	ctx, cancel := context.WithTimeout(ctx, unsentReadTimeout)
	defer cancel()
	n, ok, err := r.countUnsent(ctx)
	switch {
	case err != nil:
		c.at = time.Now()
		r.e.log.DebugContext(ctx, "saga: counting the unsent commands failed; the gauge keeps its last count",
			slog.String(telemetry.LogSaga, r.e.t.name), slog.Any(telemetry.LogError, err))
	case ok:
		c.n, c.known, c.at = n, true, time.Now()
	}
	return c.n, c.known
}

// countUnsent counts the commands of the step records after the outbox
// checkpoints of the segments this Run holds, in one read of the log from
// the lowest of them.
func (r *Runner[S]) countUnsent(ctx context.Context) (int64, bool, error) {
	held := r.held.Load()
	if held == nil && !(r.opts.Leases != nil && r.segments > 1) {
		every := make([]int, r.segments) // every segment runs here, leases or not
		for k := range every {
			every[k] = k
		}
		held = &every
	}
	checkpoints := r.checkpoints()
	if held == nil || checkpoints == nil {
		return 0, false, nil // the segments this Run holds are not known yet
	}
	after := make(map[int]eventstore.Position, len(*held))
	var from eventstore.Position
	for i, k := range *held {
		_, outbox := r.segmentNames(k)
		cp, err := checkpoints.Checkpoint(ctx, outbox)
		if err != nil {
			return 0, false, err
		}
		after[k] = cp.Position
		if i == 0 || cp.Position.Before(from) {
			from = cp.Position
		}
	}
	if len(after) == 0 {
		return 0, true, nil
	}
	var n int64
	read := 0
	for ev, err := range r.e.store.ReadAll(ctx, from, recordsFilter(r.e.t.name)) {
		if err != nil {
			return 0, false, err
		}
		id, ok := strings.CutPrefix(ev.StreamID, r.e.t.Category())
		if cp, mine := after[Segment(id, r.segments)]; ok && mine && cp.Before(ev.Position) {
			n += int64(commandsIn(ev))
		}
		if read++; read >= maxUnsentRecords {
			break
		}
	}
	return n, true, nil
}

// commandsIn returns how many commands step record ev sends, reading no
// more of it than that (0 for one that cannot be read: the outbox passes
// it over).
func commandsIn(ev eventstore.Event) int {
	if ev.Type == recordType && ev.SchemaVersion == recordVersion {
		var part struct {
			Commands []json.RawMessage `json:"commands"`
		}
		if json.Unmarshal(ev.Data, &part) == nil {
			return len(part.Commands)
		}
		return 0
	}
	rec, err := decodeRecord(ev)
	if err != nil {
		return 0
	}
	return len(rec.Commands)
}
