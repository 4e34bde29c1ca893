package saga

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/backoff"
	"github.com/cairn-es/cairn/internal/lru"
)

// Clock tells a runner the time. Tests pass a clock they move (see
// sagatest.Clock); nil means the system clock. Only Run waits on it, to
// wake when a deadline falls due: a clock that is also a [Waker] wakes it
// exactly then; one that is not (a Now alone, enough for Deliver, FireDue
// and CatchUp) is looked at again every [PollInterval] while Run runs.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
}

// Waker is a [Clock] that can wake Run when a time on it has come.
type Waker interface {
	// After returns a channel that receives once d has passed on this
	// clock.
	After(d time.Duration) <-chan time.Time
}

// PollInterval is how often Run looks at a [Clock] that is not a [Waker]
// again, by the wall clock.
const PollInterval = time.Second

// Backoff is how long a runner waits between the attempts of a failing
// message (see [RunnerOptions.Retry]): Initial, doubled (or times
// Multiplier) up to Max.
type Backoff = backoff.Policy

// systemClock is the wall clock.
type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// after returns a channel that receives once d has passed on the engine's
// clock, or, for a clock that is not a Waker, after at most PollInterval
// of wall time: the caller looks at the clock again then.
func (e *engine[S]) after(d time.Duration) <-chan time.Time {
	if w, ok := e.clock.(Waker); ok {
		return w.After(d)
	}
	return time.After(min(d, PollInterval))
}

// RunnerOptions configure a [Runner]. The zero value is the default.
type RunnerOptions struct {
	// Clock is the time of steps and deadlines; nil means the system
	// clock.
	Clock Clock
	// Retry is the wait between the attempts of a failing handler; its zero
	// value waits 10ms, doubling up to 1s.
	Retry Backoff
	// Attempts is how many times a failing handler runs before its message
	// is parked; zero means [DefaultAttempts].
	Attempts int
	// Logger receives what the runner handles on its own; nil means
	// slog.Default().
	Logger *slog.Logger

	// CacheSize is how many instances' latest steps the runner keeps in
	// memory; zero means [DefaultCacheSize], negative none. A step by
	// another process is found at the next append, which then reloads.
	CacheSize int
	// Workers bounds how many instances Run steps at once; zero means
	// [DefaultWorkers]. One instance's messages are always stepped one at
	// a time, in order.
	Workers int
	// Checkpoints keeps the positions of the runner's two consumers (see
	// [Runner.EventsConsumer] and [Runner.OutboxConsumer]); nil means the
	// event store, which must then be an [storekit.CheckpointStore].
	Checkpoints storekit.CheckpointStore
	// DeadLetters keeps the stored events that reach no instance (they do
	// not decode, or their mapping finds no instance ID); nil means
	// Checkpoints, when it is a [storekit.DeadLetterStore]. Without one,
	// such an event stops Run.
	DeadLetters storekit.DeadLetterStore
	// Exclusive makes each of the runner's consumers hold a lease, so that
	// of several processes running the saga type one reads each log at a
	// time. The leases are kept in Leases, or when that is nil in the
	// checkpoint store, which must then be an [storekit.LeaseStore] (all
	// of Cairn's are). Correctness does not depend on it: two runners that
	// step one instance at once end with one step (the append's expected
	// version and the watermarks decide).
	Exclusive bool
	// Leases keeps the leases; setting it implies Exclusive. Set it only
	// to keep leases apart from the checkpoints.
	Leases storekit.LeaseStore
	// LeaseTTL and Holder are the leases' (see projection.Options).
	LeaseTTL time.Duration
	Holder   string
	// GapAlert is how long a held message may wait for a missing message of
	// its source before Run warns about the gap (once, through Logger);
	// zero means [DefaultGapAlert], negative never. Open gaps are in
	// [Runner.Gaps] and [Stats] whatever their age.
	GapAlert time.Duration
	// BatchSize and MaxBatchDelay size the consumers' batches (see
	// projection.Options); the instances of one batch are stepped in
	// parallel.
	BatchSize     int
	MaxBatchDelay time.Duration

	// Segments lets several processes share the saga type's instances:
	// instance IDs hash to this many segments (see [Segment]), each with
	// its own two consumers, checkpoints and leases (see
	// [Runner.SegmentConsumers]). Zero or one is one segment, under the
	// consumer names of [Runner.EventsConsumer] and [Runner.OutboxConsumer];
	// at most [MaxSegments].
	//
	// When Exclusive, each Run holds one of Segments member leases
	// ("saga:<type>:member-j/<Segments>"), counts the live members every
	// third of LeaseTTL, and runs the segments whose index modulo the
	// member count is its rank among them: processes that join get their
	// share within a third of a TTL, and the share of a process that dies
	// is taken over once its leases lapse. Each process's Holder must then
	// be its own (empty gives each Run a new one). Otherwise every
	// runner runs every segment, and the instances' watermarks and the
	// appends' expected versions keep it to one effect.
	Segments int
	// ExternalEvents says the saga takes its events only from the caller,
	// through [Runner.Deliver] and [Runner.HandleStored] (a broker's
	// consumer, a subscription of the caller's own), not from a
	// subscription to the store: Run and CatchUp then run the outbox and
	// the deadlines alone, and no events consumer, so no checkpoint moves
	// past an event the caller has yet to hand over (Stats.Events then
	// shows a consumer that does not run: watch the outbox's instead).
	ExternalEvents bool
}

// Defaults of [RunnerOptions].
const (
	// DefaultAttempts is how many times a failing handler runs before its
	// message is parked.
	DefaultAttempts = 5
	// DefaultCacheSize is how many instances a runner keeps loaded.
	DefaultCacheSize = 1024
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
	e := &engine[S]{t: t, store: store, clock: clock, now: clock.Now, log: opts.Logger, retry: opts.Retry, attempts: opts.Attempts, stats: &counters{}}
	if e.log == nil {
		e.log = slog.Default()
	}
	if e.attempts <= 0 {
		e.attempts = DefaultAttempts
	}
	switch {
	case opts.CacheSize == 0:
		e.cache = lru.New[*instance[S]](DefaultCacheSize)
	case opts.CacheSize > 0:
		e.cache = lru.New[*instance[S]](opts.CacheSize)
	}
	r := &Runner[S]{e: e, bus: bus, timers: newSegmentTimers(segments), stuck: newStuckIndex(e.anyOrder), reports: lru.New[cachedReport](reportCacheSize), opts: opts, workers: opts.Workers, segments: segments}
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

// Delivery is an event that reaches a saga from outside the event store:
// from another service's broker or topic.
type Delivery struct {
	// Source names where the event comes from (a topic, a partition, the
	// sender's stream), by the rules of a stream name: not empty, at most
	// [storekit.MaxStreamLen] bytes of printable UTF-8, not starting with
	// "$". Deliveries and the store's events share one namespace of
	// sources: a delivery source must not be named as a stream whose
	// events the saga maps.
	Source string
	// Sequence numbers the source's messages for one instance 0, 1, 2, ...
	// without gaps, so that the instance can put them in order and drop
	// redeliveries. A message above the next expected one is held until
	// the missing ones arrive (or [Runner.Release] gives up on them);
	// event types mapped with AnyOrder are handled at once.
	Sequence uint64
	// ID is the event's ID, if the source gives one; it is recorded with
	// the step.
	ID uuid.UUID
	// Event is the event: a value of a type mapped with [On].
	Event any
	// Metadata travels with the event into the instance's record.
	Metadata eventstore.Metadata
}

// Outcome says what a runner did with a message. It is meaningful only
// when the call that returned it returned no error.
type Outcome int

// Outcomes of [Runner.Deliver].
const (
	// Handled: the instance's handler ran and its step is stored.
	Handled Outcome = Outcome(handled)
	// Duplicate: the instance had handled (or held) this message before.
	Duplicate Outcome = Outcome(duplicate)
	// Ignored: the instance has not started and the event cannot start
	// it, or the instance is complete.
	Ignored Outcome = Outcome(ignored)
	// Held: the message is early, or the instance has a parked message; it
	// is kept in the instance's stream and handled in its turn.
	Held Outcome = Outcome(heldBack)
	// Parked: the handler kept failing; the message is parked for this
	// instance, which holds later messages behind it.
	Parked Outcome = Outcome(parkedOut)
)

// String returns the outcome's name.
func (o Outcome) String() string {
	switch o {
	case Handled:
		return "handled"
	case Duplicate:
		return "duplicate"
	case Ignored:
		return "ignored"
	case Held:
		return "held"
	case Parked:
		return "parked"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Deliver hands one event from outside the store to its instance, through
// the same steps as the store's events: duplicates are dropped, early
// messages held until their turn, failing handlers retried and then parked.
// When Deliver returns nil the outcome is durable, so the caller can
// acknowledge the message to its broker.
//
// The source is checked as a stream name is (not empty, at most
// [storekit.MaxStreamLen] bytes of printable UTF-8, not starting with
// "$"), and the metadata as an append checks it: a bad one is an
// [*eventstore.InvalidArgumentError] naming the field. An event of an
// unmapped type, or one whose mapping finds no instance, is a
// [*HandlerError]. An early message that the instance cannot keep within
// [MaxStepSize], beside those it holds already, is a [*RecordSizeError]
// (match [ErrRecordTooLarge]): nothing is stored, and the broker may
// deliver it again once the gap has filled. In every error case nothing
// is stored.
func (r *Runner[S]) Deliver(ctx context.Context, d Delivery) (Outcome, error) {
	t := r.e.t
	if err := storekit.ValidateStream(d.Source); err != nil {
		var bad *eventstore.InvalidArgumentError
		if errors.As(err, &bad) {
			named := *bad
			named.Field, named.Stream = "delivery source", ""
			return 0, &named
		}
		return 0, err
	}
	if err := storekit.ValidateMetadata(d.Metadata); err != nil {
		return 0, err
	}
	id, err := r.InstanceFrom(d.Event, Origin{Source: d.Source, Sequence: d.Sequence, Metadata: d.Metadata})
	if err != nil {
		return 0, &HandlerError{Saga: t.name, Message: fmt.Sprintf("delivery #%d of %q (%T)", d.Sequence, d.Source, d.Event), Err: err}
	}
	encoded, err := t.reg.EncodeValue(d.Event)
	if err != nil {
		return 0, err
	}
	payload, md := toRaw(encoded), d.Metadata.Clone()
	msg := &message{in: envelope{Source: d.Source, Sequence: d.Sequence, EventID: d.ID, Type: payload.Type, Event: &payload, Metadata: &md},
		md: eventstore.Metadata{CorrelationID: md.CorrelationID}}
	if d.ID != (uuid.UUID{}) {
		msg.md.CausationID = d.ID.String()
	}
	out, err := r.e.process(ctx, id, msg)
	return Outcome(out), err
}

// InstanceOf returns the ID of the instance that event, with metadata md,
// goes to, by its mapping's Instance function (see [Runner.InstanceFrom]
// for a mapping that also needs where the event came from).
func (r *Runner[S]) InstanceOf(event any, md eventstore.Metadata) (string, error) {
	return r.InstanceFrom(event, Origin{Metadata: md})
}

// InstanceFrom returns the ID of the instance that event, from origin
// from, goes to, by its mapping's Instance or InstanceFrom function: the
// instance [Runner.Deliver] would step for a delivery of that source and
// sequence.
func (r *Runner[S]) InstanceFrom(event any, from Origin) (string, error) {
	m := r.e.t.events[typeOf(event)]
	if m == nil {
		return "", fmt.Errorf("%w: saga %q maps no event of type %T", eventstore.ErrInvalidArgument, r.e.t.name, event)
	}
	return instanceOf(m, event, from)
}

// instanceOf runs a mapping's Instance function, which is user code: a
// panic or an empty ID is an error.
func instanceOf[S any](m *eventMapping[S], v any, from Origin) (id string, err error) {
	err = guard(func() error {
		id = m.instance(deref(v), from)
		return nil
	})
	if err == nil && id == "" {
		err = fmt.Errorf("%w: the mapping of %s found no instance (an empty instance ID)", eventstore.ErrInvalidArgument, m.goType)
	}
	return id, err
}

// observe tells the runner's indexes (deadlines, what is stuck) of record version
// of instance id: one it stored, or one its outbox read. Only the
// instances of the segments this runner runs are indexed.
func (r *Runner[S]) observe(id string, version uint64, rec *record) {
	r.observeRecord(id, version, rec, false)
}

// observeScanned is observe for a record that a scan of the saga's
// records read, which the steps observed since the scan began override.
func (r *Runner[S]) observeScanned(id string, version uint64, rec *record) {
	r.observeRecord(id, version, rec, true)
}

func (r *Runner[S]) observeRecord(id string, version uint64, rec *record, scanned bool) {
	r.activity.RLock()
	defer r.activity.RUnlock()
	if !r.timers.isActive(Segment(id, r.segments)) {
		return
	}
	r.timers.observe(id, version, rec.Deadlines)
	if scanned {
		r.stuck.observeScanned(id, version, rec)
	} else {
		r.stuck.observe(id, version, rec)
	}
}
