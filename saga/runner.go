package saga

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/backoff"
	"github.com/cairn-es/cairn/internal/lru"
	"github.com/cairn-es/cairn/internal/telemetry"
)

// Runner runs one saga type on an event store: it takes messages (events
// from the store, or delivered from outside with [Runner.Deliver]) to their
// instances, one at a time per instance, and is where operators retry,
// skip and release. Its methods are safe for concurrent use.
type Runner[S any] struct {
	e      *engine[S]
	bus    *command.Bus
	timers *timers
	stuck  *stuckIndex
	// reports caches the Redrive reports that Explain serves, by stream.
	reports *lru.Cache[cachedReport]
	// forgotten are the stored event types the instances took that this
	// code no longer reads.
	forgotten forgottenTypes
	// subscribed guards the check of what the subscription reads (see
	// checkSubscription), done once it succeeds.
	subscribed   sync.Mutex
	subscribedOK bool
	opts         RunnerOptions
	workers      int
	// sent counts the commands dispatched, for CatchUp to tell when
	// nothing is left to do.
	sent atomic.Int64

	startOnce   sync.Once
	startErr    error
	consumers   atomic.Pointer[consumers]
	deadLetters storekit.DeadLetterStore

	// scans runs the scans of the deadline index one at a time (see
	// Runner.scan).
	scans sync.Mutex

	// segments is how many segments instances hash to; held, while Run
	// runs, the ones whose consumers run here. activity orders a
	// segment's start and stop (write) with what the indexes observe
	// (read), so that a stopped segment leaves nothing behind.
	segments int
	held     atomic.Pointer[[]int]
	activity sync.RWMutex

	// tel traces and measures the runner's work (the engine shares it);
	// gaugeReg is its gauge callback while Run runs, and unsentCount the
	// latest count of the commands not sent yet (see unsentNow).
	tel         *sagaTelemetry
	gaugeReg    gaugeRegistration
	unsentCount unsentCount
}

// NewRunner returns a runner of saga type t on store, whose commands go
// through bus. It ends t's set-up: t must map at least one event type, bus
// must route every command type t sends, t's codec registry must be
// valid (see [codec.Registry.Validate]), and opts.Segments at most
// [MaxSegments]; otherwise the error is a [*SetupError].
func NewRunner[S any](t *Type[S], store eventstore.Store, bus *command.Bus, opts RunnerOptions) (*Runner[S], error) {
	if t == nil || store == nil {
		return nil, fmt.Errorf("%w: a saga runner needs a saga type and an event store", eventstore.ErrInvalidArgument)
	}
	if err := t.freeze(bus); err != nil {
		return nil, err
	}
	segments := max(opts.Segments, 1)
	if opts.Segments < 0 || opts.Segments > MaxSegments {
		return nil, &SetupError{Saga: t.name, Reason: fmt.Sprintf("RunnerOptions.Segments is %d, outside [0, %d]", opts.Segments, MaxSegments)}
	}
	clock := opts.Clock
	if clock == nil {
		clock = systemClock{}
	}
	e := &engine[S]{t: t, store: store, clock: clock, now: clock.Now, log: telemetry.Logger(opts.Logger), retry: backoff.Of(opts.Retry),
		attempts: opts.Retry.Attempts, stats: &counters{}, tel: newSagaTelemetry(t.name, t.commandTypes(), store, opts)}
	if e.attempts <= 0 {
		e.attempts = DefaultAttempts
	}
	switch {
	case opts.NoCache:
	case opts.CacheSize <= 0:
		e.cache = lru.New[*instance[S]](DefaultCacheSize)
	default:
		e.cache = lru.New[*instance[S]](opts.CacheSize)
	}
	r := &Runner[S]{e: e, tel: e.tel, bus: bus, timers: newSegmentTimers(segments), stuck: newStuckIndex(e.anyOrder), reports: lru.New[cachedReport](reportCacheSize), opts: opts, workers: opts.Workers, segments: segments}
	if opts.Exclusive && opts.Leases == nil {
		leases, ok := r.checkpoints().(storekit.LeaseStore)
		if !ok {
			return nil, &SetupError{Saga: t.name, Reason: "RunnerOptions.Exclusive needs RunnerOptions.Leases: the checkpoint store keeps no leases"}
		}
		r.opts.Leases = leases
	}
	if r.workers <= 0 {
		r.workers = DefaultWorkers
	}
	e.stored = r.observe
	return r, nil
}
