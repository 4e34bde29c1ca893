package projection

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/oklog/ulid/v2"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/backoff"
	"github.com/cairn-es/cairn/retry"
)

// Defaults for the zero [Options].
const (
	DefaultBatchSize     = 100
	DefaultMaxBatchDelay = 100 * time.Millisecond
	DefaultAttempts      = 5
	DefaultLeaseTTL      = 10 * time.Second
	// MaxBatchSize is the largest Options.BatchSize: a consumer holds a
	// batch's events in memory, and its channel and buffer are sized by it,
	// so a huge size would exhaust memory before the first event. It is
	// [storekit.MaxAppendEvents], the most events one append writes.
	MaxBatchSize = storekit.MaxAppendEvents
)

// FailureMode says what a consumer does with an event its handler still
// fails on after every retry.
type FailureMode int

const (
	// Park stores the event as a dead letter and goes on with the next one.
	Park FailureMode = iota
	// Stop makes Run return a [*HandlerError]; the checkpoint stays before
	// the failing event, so the next run starts with it.
	Stop
)

// attempts is how many times a handler runs on one event under opts.
func (o Options) attempts() int {
	if o.Retry.Attempts <= 0 {
		return DefaultAttempts
	}
	return o.Retry.Attempts
}

// delay is the wait before the retry after attempt failed.
func (o Options) delay(attempt int) time.Duration {
	return backoff.Of(o.Retry).Delay(attempt)
}

// Options configure a [Consumer]. The zero value is the default: every
// event, batches of [DefaultBatchSize] or [DefaultMaxBatchDelay],
// [DefaultAttempts] runs of a failing handler, failing events parked, no
// lease (see Exclusive).
type Options struct {
	// Filter selects the events to consume, by stored type name and stream
	// prefix. Filter by stored names: see codec.Registry.SourceTypes.
	Filter eventstore.Filter
	// BatchSize is how many stored events the consumer handles before it
	// moves the checkpoint (in one transaction, for a transactional
	// consumer); zero means [DefaultBatchSize]. At most [MaxBatchSize].
	BatchSize int
	// MaxBatchDelay bounds how long an event waits for its batch to fill
	// before the batch is handled; zero means [DefaultMaxBatchDelay].
	MaxBatchDelay time.Duration
	// Retry is how a failing handler is run again: Retry.Attempts is how
	// many times it runs on one event before the event is parked (or the
	// consumer stops); zero means [DefaultAttempts], one means no retry.
	// The waits between the runs follow the rest of the policy.
	Retry retry.Policy
	// OnFailure says what happens once the retries are spent: [Park]
	// (the default) or [Stop].
	OnFailure FailureMode
	// DeadLetters stores parked events; nil means the checkpoint store, when
	// it is also a [storekit.DeadLetterStore]. Without one, OnFailure is
	// [Stop] whatever it says.
	DeadLetters storekit.DeadLetterStore
	// Exclusive makes the consumer hold the lease named after it while it
	// runs: of several processes, one runs, the others wait. The lease is
	// kept in Leases, or when that is nil in the checkpoint store, which
	// must then be an [storekit.LeaseStore] (all of Cairn's are).
	// Without a lease, processes that run one consumer each do the work,
	// and the checkpoint's fence keeps the effects to one.
	Exclusive bool
	// Leases keeps the consumer's lease; setting it implies Exclusive.
	// Set it only to keep leases apart from the checkpoints.
	Leases storekit.LeaseStore
	// LeaseTTL is how long a lease lasts without renewal, and so how soon
	// a waiting process takes over from one that died; zero means
	// [DefaultLeaseTTL]; it must be from storekit.MinLeaseTTL to
	// storekit.MaxLeaseTTL. The holder renews it every third of the TTL; when
	// no renewal succeeds (or one hangs) until a fifth of the TTL before
	// the lease could lapse, it stops handling events, unless it is a
	// transactional consumer whose lease lives in its store: its
	// transactions renew the lease when it is due, and only a lost lease
	// stops it (see [storekit.TxLeaseStore]). It is also how long a
	// [Consumer.RetryDeadLetter]'s claim on its dead letter lasts without
	// renewal, with or without a lease.
	LeaseTTL time.Duration
	// Holder names this process in the lease, at most [MaxHolderLen]
	// bytes of UTF-8 without NUL bytes. Each session (a Run's, until it
	// loses the lease or stops; a CatchUp; a Rebuild; a retry) holds the
	// lease under Holder and an ID of its own, so that two sessions of one
	// process never share a lease: a second one waits for it like another
	// process. Empty means the session ID alone.
	Holder string
	// Logger receives the consumer's records (parked events, lease changes,
	// periodic stats); nil means slog.Default().
	Logger *slog.Logger
	// TracerProvider and MeterProvider take the consumer's spans and
	// metrics (docs/observability.md lists them); nil means the global
	// providers of go.opentelemetry.io/otel, which do nothing until the
	// service installs an SDK.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	// StatsInterval is how often a running consumer logs its [Stats] at
	// info level; zero (or less) means every 30 seconds.
	StatsInterval time.Duration
	// NoStatsLog keeps a running consumer from logging its Stats,
	// whatever StatsInterval says.
	NoStatsLog bool
}

// validate checks the options of consumer name where New can still say
// what is wrong, instead of the first run: the name, the batch size, the
// filter, and with a lease store the lease's TTL and holder (as every
// [storekit.LeaseStore] checks them).
func (o Options) validate(name string) error {
	if err := storekit.ValidateConsumerName(name); err != nil {
		return err
	}
	if o.BatchSize > MaxBatchSize {
		return &eventstore.InvalidArgumentError{Consumer: name, Index: -1, Field: "batch size",
			Reason: fmt.Sprintf("is %d, more than the limit of %d", o.BatchSize, MaxBatchSize)}
	}
	if err := o.Filter.Validate(); err != nil {
		var bad *eventstore.InvalidArgumentError
		if errors.As(err, &bad) && bad.Consumer == "" {
			named := *bad
			named.Consumer = name
			return &named
		}
		return err
	}
	if o.Leases == nil {
		return nil
	}
	if len(o.Holder) > MaxHolderLen {
		return &eventstore.InvalidArgumentError{Consumer: name, Index: -1, Field: "lease holder",
			Reason: fmt.Sprintf("is %d bytes long, more than the limit of %d (the lease stores' limit less a session ID)", len(o.Holder), MaxHolderLen)}
	}
	// Checked as the store will check it, session ID included.
	holder := strings.Repeat("0", ulid.EncodedSize)
	if o.Holder != "" {
		holder = o.Holder + holderSep + holder
	}
	return storekit.ValidateLease(name, holder, o.leaseTTL())
}

func (o Options) batchSize() int {
	if o.BatchSize <= 0 {
		return DefaultBatchSize
	}
	return o.BatchSize
}

func (o Options) maxDelay() time.Duration {
	if o.MaxBatchDelay <= 0 {
		return DefaultMaxBatchDelay
	}
	return o.MaxBatchDelay
}

func (o Options) leaseTTL() time.Duration {
	if o.LeaseTTL <= 0 {
		return DefaultLeaseTTL
	}
	return o.LeaseTTL
}
