package command

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/busprobe"
	"github.com/cairn-es/cairn/internal/keylock"
	"github.com/cairn-es/cairn/internal/lru"
	"github.com/cairn-es/cairn/internal/telemetry"
	"github.com/cairn-es/cairn/retry"
)

// Defaults of [Options].
const (
	// DefaultAttempts is how many times a command is decided before the
	// bus gives up on its version conflicts with a [*ContentionError]. It
	// comes from BenchmarkContendedGiveUps (docs/benchmarks.md): two
	// processes saturating one aggregate on PostgreSQL gave up on 0.6 in
	// 1,000 commands at 5 attempts, 1 in 60,000 at 15 and none in 60,000 at
	// 20. A loser keeps losing while the winner's process has more commands
	// for the aggregate queued, so the give-ups fall slowly with attempts.
	// With the default backoff, 20 attempts wait at most about 13 s in all.
	DefaultAttempts = 20
	// DefaultCacheSize is how many aggregate instances a bus keeps loaded.
	DefaultCacheSize = 1024
)

// Options configure a [Bus]. The zero value is the default.
type Options struct {
	// Retry is how a command whose append meets a version conflict is
	// decided again: Retry.Attempts bounds how many times it is decided
	// in all (zero means [DefaultAttempts]), and the waits between them
	// follow the rest of the policy.
	Retry retry.Policy
	// CacheSize is how many loaded aggregates the bus keeps, least recently
	// used first out; zero (or less) means [DefaultCacheSize].
	CacheSize int
	// NoCache keeps no aggregate loaded: every dispatch loads its aggregate
	// from the store (and its snapshot), whatever CacheSize says.
	NoCache bool
	// Snapshots stores aggregate snapshots, for the types that ask for
	// them. Nil means the event store itself when it implements
	// [storekit.SnapshotStore], else no snapshots.
	Snapshots storekit.SnapshotStore
	// ScanLimit is ignored.
	//
	// Deprecated: see [aggregate.RepositoryOptions.ScanLimit]: the bus no
	// longer reads the stream to tell a new command from an old one.
	ScanLimit int
	// Middleware wraps every dispatch, the first outermost.
	Middleware []Middleware
	// Logger receives what the bus and its repositories handle on their
	// own (discarded snapshots, conflicts retried). Nil means
	// slog.Default(). Records logged inside a dispatch name its trace
	// (trace_id, span_id).
	Logger *slog.Logger
	// TracerProvider and MeterProvider take the bus and its repositories'
	// spans and metrics (docs/observability.md lists them); nil means the
	// global providers of go.opentelemetry.io/otel, which do nothing until
	// the service installs an SDK. Every Dispatch starts a `dispatch
	// {command type}` span, whose middleware runs inside it; the spans of
	// its steps (load, decide, append) are started only when it records.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
}

// Bus dispatches commands to aggregates. Create it with [New], set up its
// routes with [Route], then dispatch from any number of goroutines.
type Bus struct {
	store eventstore.Store
	reg   *codec.Registry
	opts  Options
	log   *slog.Logger
	tel   *busTelemetry
	// cache holds loaded aggregate instances by stream. An instance taken
	// from it is used only under its stream's lock, so it is never shared
	// by two dispatches at once; whatever makes it stale (a conflict, a
	// failed or uncertain append) evicts it.
	cache   *lru.Cache[any]
	locks   keylock.Locks
	handler Handler

	mu sync.RWMutex
	// routes are the routed command types' routes, their names as their
	// events record them (see nameOf) and their telemetry, made once at
	// Route: one lookup a dispatch finds all three with.
	routes map[reflect.Type]routedType
	types  map[string]any // aggregate name -> *aggregate.Type, to catch two types with one name
	repos  map[any]route  // *aggregate.Type -> its route, shared by its command types
}

// New returns a bus that loads aggregates from store and decodes and
// encodes their events with reg.
// Register every event type and upcaster with reg before the first
// [Route], which validates and freezes it.
func New(store eventstore.Store, reg *codec.Registry, opts Options) *Bus {
	if opts.Retry.Attempts <= 0 {
		opts.Retry.Attempts = DefaultAttempts
	}
	switch {
	case opts.NoCache:
		opts.CacheSize = 0
	case opts.CacheSize <= 0:
		opts.CacheSize = DefaultCacheSize
	}
	b := &Bus{
		store:  store,
		reg:    reg,
		opts:   opts,
		log:    telemetry.Logger(opts.Logger),
		tel:    newBusTelemetry(opts),
		cache:  lru.New[any](opts.CacheSize),
		routes: make(map[reflect.Type]routedType),
		types:  make(map[string]any),
		repos:  make(map[any]route),
	}
	var h Handler = HandlerFunc(b.dispatch)
	for i := len(opts.Middleware) - 1; i >= 0; i-- {
		h = opts.Middleware[i](h)
	}
	b.handler = h
	return b
}

// A saga runner checks at set-up that its bus routes what it sends, and
// commandtest looks at the cache, through internal/busprobe.
func init() { busprobe.Register((*Bus).routesType, (*Bus).cachedAggregates) }

// routesType reports whether the bus routes commands of Go type ct.
func (b *Bus) routesType(ct reflect.Type) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	_, ok := b.routes[ct]
	return ok
}

// Dispatch runs one command: it loads the aggregate the command names,
// returns the earlier result if the command ID already produced events
// there (or had its rejection recorded), else lets the aggregate decide and
// appends its events.
//
// The aggregate's own rejection is returned unchanged, with
// Result.Rejected set; with Message.RecordRejection it is recorded first
// in the aggregate's stream, and a later dispatch of the same ID returns it
// as a [*RecordedRejectionError]. A command whose type
// has no route is a [*NoRouteError]. A nil command, an ID, CorrelationID or
// CausationID that no store can hold (not UTF-8, a NUL byte, an ID longer
// than storekit.MaxCommandIDLen), bad Extra metadata, or an aggregate ID
// that makes no valid stream name is an [*eventstore.InvalidArgumentError]
// naming the field, before anything is loaded. Version conflicts that outlast
// Options.Retry.Attempts are a [*ContentionError], which matches
// [ErrContention] and wraps the store's last [*eventstore.WrongVersionError].
//
// Every dispatch is traced as a `dispatch {command type}` span, and
// counted and timed by outcome (docs/observability.md). Its middleware
// runs inside that span, so that the span lasts as long as the caller
// waits, a refusal by middleware is counted as the dispatch's outcome like
// any other, and what middleware logs names the dispatch's trace.
func (b *Bus) Dispatch(ctx context.Context, msg Message) (res Result, err error) {
	var start time.Time
	if b.tel.duration.Enabled(ctx) {
		start = time.Now() // the clock is read only for a histogram that records
	}
	ct := reflect.TypeOf(msg.Command)
	ctel := b.telemetryOf(msg.Command)
	ctx, span := b.tel.start(ctx, ctel, msg.ID)
	ended := false
	defer func() {
		if !ended { // a panic (of a middleware's) on its way up: end and count the dispatch as failed
			b.tel.end(ctx, span, ctel, &msg, res, errDispatchPanicked, start)
		}
	}()
	res, err = b.dispatchMessage(ctx, &msg)
	if reflect.TypeOf(msg.Command) != ct {
		ctel = b.telemetryOf(msg.Command) // middleware changed the command: count the one dispatched
	}
	b.tel.end(ctx, span, ctel, &msg, res, err, start)
	ended = true
	return res, err
}

// errDispatchPanicked is what a dispatch that panicked is traced and
// counted with, as the panic goes on up to the caller.
var errDispatchPanicked error = dispatchPanicked{}

type dispatchPanicked struct{}

func (dispatchPanicked) Error() string     { return "command: the dispatch panicked" }
func (dispatchPanicked) ErrorType() string { return "panic" }

// dispatchMessage checks msg and hands it to the middleware chain.
func (b *Bus) dispatchMessage(ctx context.Context, msg *Message) (Result, error) {
	if err := msg.validate(); err != nil {
		return Result{CommandID: msg.ID}, err
	}
	if msg.ID == "" {
		msg.ID = eventstore.NewEventID().String()
	}
	return b.handler.Dispatch(ctx, msg)
}

// dispatch is the innermost handler: routing and the decide loop.
func (b *Bus) dispatch(ctx context.Context, msg *Message) (Result, error) {
	if err := msg.checkReserved(); err != nil {
		return Result{CommandID: msg.ID}, err
	}
	if msg.Command == nil {
		return Result{CommandID: msg.ID}, &NoRouteError{CommandType: "<nil>"}
	}
	typ, ok := b.routeOf(reflect.TypeOf(msg.Command))
	if !ok {
		return Result{CommandID: msg.ID}, &NoRouteError{CommandType: fmt.Sprintf("%T", msg.Command)}
	}
	return typ.route.dispatch(ctx, b, msg, typ)
}

// routedType is what the bus knows of a routed command type.
type routedType struct {
	route route
	name  commandName
	tel   *commandTelemetry
}

// routeOf returns what the bus knows of command type ct, and whether it
// is routed.
func (b *Bus) routeOf(ct reflect.Type) (routedType, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	typ, ok := b.routes[ct]
	return typ, ok
}

// commandName is how a command type is named in its events (see
// busrepo.SaveOptions.CommandType): the codec's name for it, which
// survives a refactor of the Go code, and the older names that upcasters
// rename into it. A type the codec does not know has no name: nothing is
// recorded, and a reused ID goes unnoticed (a Go type name would change
// with a move of its package, and refuse a redelivery across the move).
type commandName struct {
	name  string
	names map[string]bool
}

// nameOf returns the name of command type ct.
func (b *Bus) nameOf(ct reflect.Type) commandName {
	name, _, ok := b.reg.NameOfType(ct)
	if !ok {
		return commandName{}
	}
	n := commandName{name: name, names: make(map[string]bool)}
	for _, older := range b.reg.SourceTypes(name) {
		n.names[older] = true
	}
	n.names[name] = true
	return n
}

// is reports whether a command recorded under the name recorded is of
// this type: the same name or an older one, or one of the names unknown.
func (n commandName) is(recorded string) bool {
	return recorded == "" || n.name == "" || n.names[recorded]
}

// cachedAggregates returns how many loaded aggregates the bus keeps now.
func (b *Bus) cachedAggregates() int { return b.cache.Len() }
