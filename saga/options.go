package saga

import (
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/retry"
)

// RunnerOptions configure a [Runner]. The zero value is the default.
type RunnerOptions struct {
	// Clock is the time of steps and deadlines; nil means the system
	// clock.
	Clock Clock
	// Retry is how a failing handler is run again: Retry.Attempts is how
	// many times it runs before its message is parked (zero means
	// [DefaultAttempts]), and the waits between the runs follow the rest
	// of the policy.
	Retry retry.Policy
	// Logger receives what the runner handles on its own; nil means
	// slog.Default(). Records logged inside a span name its trace_id and
	// span_id.
	Logger *slog.Logger
	// TracerProvider and MeterProvider take the runner and its consumers's spans and
	// metrics (docs/observability.md lists them); nil means the global
	// providers of go.opentelemetry.io/otel, which do nothing until the
	// service installs an SDK. The runner's consumers (its events and
	// outbox consumers) are given both. Each message an instance takes is
	// a `step <type>` span, each record a `append saga:<type>` span whose
	// context the record keeps, each command the outbox sends a
	// `send <command type>` span linked to that context, each deadline
	// that fires a `deadline <type>` trace. The gauges are observed while
	// [Runner.Run] runs.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider

	// CacheSize is how many instances' latest steps the runner keeps in
	// memory; zero (or less) means [DefaultCacheSize]. A step by another
	// process is found at the next append, which then reloads.
	CacheSize int
	// NoCache keeps no instance in memory: every step loads its instance's
	// latest record from the store, whatever CacheSize says.
	NoCache bool
	// Workers bounds how many instances Run steps at once; zero means
	// [DefaultWorkers]. One instance's messages are always stepped one at
	// a time, in order.
	Workers int
	// Checkpoints keeps the positions of the runner's consumers (see
	// [Runner.Consumers]); nil means the event store, which must then be
	// an [storekit.CheckpointStore].
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
	// zero (or less) means [DefaultGapAlert]. Open gaps are in
	// [Runner.Gaps] and [Stats] whatever their age.
	GapAlert time.Duration
	// NoGapAlert turns the gap warnings off, whatever GapAlert says.
	NoGapAlert bool
	// BatchSize and MaxBatchDelay size the consumers' batches (see
	// projection.Options); the instances of one batch are stepped in
	// parallel.
	BatchSize     int
	MaxBatchDelay time.Duration

	// Segments lets several processes share the saga type's instances:
	// instance IDs hash to this many segments (see [Segment]), each with
	// its own two consumers, checkpoints and leases (see
	// [Runner.Consumers]). Zero or one is one segment, under the consumer
	// names of earlier versions, "saga:<type>" and "saga:<type>:outbox";
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

// DefaultWorkers is how many instances a runner steps at once by default.
const DefaultWorkers = 64
