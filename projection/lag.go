package projection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/telemetry"
)

// LagCap bounds the cairn.consumer.lag gauge: reading it counts the events
// after the consumer's stored checkpoint that its filter selects, and
// stops at LagCap, so that a consumer far behind (or never run) on a large
// store costs a bounded read. A consumer that far behind reports LagCap;
// its cairn.consumer.lag.age stays exact.
const LagCap = 10_000

// lagReadTimeout bounds the store reads of one collection of a consumer's
// gauges: a collection runs every callback in turn, and a store that
// hangs must not hold the service's other metrics back. A read that times
// out reports nothing for that collection.
const lagReadTimeout = 2 * time.Second

// lagCacheFor is how long a reading of a consumer's gauges serves further
// collections (several readers or exporters collecting together) before
// the stores are read again. A variable for the tests.
var lagCacheFor atomic.Int64

func init() { lagCacheFor.Store(int64(5 * time.Second)) }

// lagGauges observe a consumer's cairn.consumer.lag, cairn.consumer.lag.age
// and cairn.consumer.dead_letters, read from its stores: the stored
// checkpoint, not this process's view, so that a consumer that is not
// running here (stopped, crashed, or running in another process) still
// shows how far behind it falls. It holds what it reads from, and not the
// [Consumer]: the meter provider keeps it for as long as it is registered,
// and the Consumer can still be collected as garbage.
type lagGauges struct {
	name        string
	events      eventstore.Store
	checkpoints storekit.CheckpointStore
	filter      eventstore.Filter
	dead        storekit.DeadLetterStore // nil: no dead letters to count
	log         *slog.Logger
	attrs       metric.ObserveOption

	lag    metric.Int64ObservableGauge
	age    metric.Float64ObservableGauge
	parked metric.Int64ObservableGauge

	mu   sync.Mutex
	read time.Time // when last is from; zero before the first reading
	last lagReading
}

// lagReading is one reading of the gauges; the ok fields say which parts
// of it the stores answered.
type lagReading struct {
	lag      int
	age      time.Duration
	lagOK    bool
	parked   int
	parkedOK bool
}

// registerGauges registers the gauges of consumer c, whose dead letters
// are in dead (nil: it parks none), with the meter of its options, once
// per consumer, and unregisters them when c is garbage: a Consumer has no
// Close, and its gauges must report while it is not running, so they last
// as long as the Consumer does.
func (c *Consumer) registerGauges(dead storekit.DeadLetterStore) {
	meter := telemetry.Meter(c.opts.MeterProvider)
	g := &lagGauges{
		name: c.name, events: c.events, checkpoints: c.checkpoints, filter: c.Filter(), dead: dead, log: c.log,
		attrs: metric.WithAttributeSet(attribute.NewSet(telemetry.MessagingConsumerGroupKey.String(c.name))),
	}
	var err error
	g.lag, err = meter.Int64ObservableGauge("cairn.consumer.lag", metric.WithUnit("{event}"),
		metric.WithDescription(fmt.Sprintf("Events after the consumer's checkpoint that its filter selects (at most %d).", LagCap)))
	telemetry.Unmade("projection", err)
	g.age, err = meter.Float64ObservableGauge("cairn.consumer.lag.age", metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest event the consumer has yet to handle; 0 when it is caught up."))
	telemetry.Unmade("projection", err)
	g.parked, err = meter.Int64ObservableGauge("cairn.consumer.dead_letters", metric.WithUnit("{event}"),
		metric.WithDescription("The consumer's dead letters."))
	telemetry.Unmade("projection", err)
	reg, err := meter.RegisterCallback(g.observe, g.lag, g.age, g.parked)
	if err != nil {
		telemetry.Unmade("projection", err)
		return
	}
	runtime.AddCleanup(c, func(r metric.Registration) { _ = r.Unregister() }, reg)
}

// observe is the gauges' callback.
func (g *lagGauges) observe(ctx context.Context, o metric.Observer) error {
	r := g.reading(ctx)
	if r.lagOK {
		o.ObserveInt64(g.lag, int64(r.lag), g.attrs)
		o.ObserveFloat64(g.age, r.age.Seconds(), g.attrs)
	}
	if r.parkedOK {
		o.ObserveInt64(g.parked, int64(r.parked), g.attrs)
	}
	return nil
}

// reading returns the last reading while it is fresh, or reads the stores
// again. Readers collecting at once wait for one read.
func (g *lagGauges) reading(ctx context.Context) lagReading {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.read.IsZero() && time.Since(g.read) < time.Duration(lagCacheFor.Load()) {
		return g.last
	}
	ctx, cancel := context.WithTimeout(ctx, lagReadTimeout)
	defer cancel()
	var r lagReading
	cp, err := g.checkpoints.Checkpoint(ctx, g.name)
	if err == nil {
		var first time.Time
		r.lag, first, _, err = pendingAfter(ctx, g.events, cp.Position, g.filter, LagCap)
		if r.lag > 0 {
			r.age = max(time.Since(first), 0)
		}
	}
	if err != nil {
		g.failed(ctx, "projection: reading the consumer's lag for its metrics", err)
	}
	r.lagOK = err == nil
	if g.dead != nil {
		r.parked, err = g.dead.CountDeadLetters(ctx, g.name)
		if err != nil {
			g.failed(ctx, "projection: counting the consumer's dead letters for its metrics", err)
		}
		r.parkedOK = err == nil
	}
	g.read, g.last = time.Now(), r
	return r
}

// pendingAfter counts the events of store after position after that
// filter selects, up to limit (capped then says there are more), and
// returns when the first of them was recorded: what a consumer whose
// checkpoint is after has left to handle, and since when it has been
// behind.
func pendingAfter(ctx context.Context, store eventstore.Store, after eventstore.Position, filter eventstore.Filter, limit int) (n int, first time.Time, capped bool, err error) {
	for e, err := range store.ReadAll(ctx, after, filter) {
		if err != nil {
			return n, first, false, err
		}
		if n == 0 {
			first = e.RecordedAt
		}
		if n == limit {
			return n, first, true, nil
		}
		n++
	}
	return n, first, false, nil
}

// failed logs a reading the stores did not answer: a warning, unless the
// store is closed, which a service's metrics reader meets as it shuts
// down after the store (the gauge then reports nothing, as it should).
func (g *lagGauges) failed(ctx context.Context, msg string, err error) {
	level := slog.LevelWarn
	if errors.Is(err, eventstore.ErrClosed) {
		level = slog.LevelDebug
	}
	g.log.Log(ctx, level, msg, slog.Any(telemetry.LogError, err))
}
