package projection

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/backoff"
	"github.com/cairn-es/cairn/internal/batchconsumer"
	"github.com/cairn-es/cairn/internal/telemetry"
)

// Consumer is a named, checkpointed consumer of a store's global log. Build
// one with [New] (plain handler, at-least-once effects) or [NewTx] (handler
// in the checkpoint's transaction, exactly-once effects), then call
// [Consumer.Run]. Its methods are safe for concurrent use.
type Consumer struct {
	name        string
	events      eventstore.Store
	reg         *codec.Registry
	checkpoints storekit.CheckpointStore
	exec        executor
	// batch, when set, is the handler of a batch consumer (see newBatch):
	// it takes whole batches of stored events, and nothing is decoded.
	batch batchconsumer.Handler
	// onClaim, when set, is told of each session's claimed checkpoint.
	onClaim batchconsumer.OnClaim
	opts    Options
	log     *slog.Logger
	stats   recorder
	tel     *instruments

	// held is the lease of the running session, once it has claimed the
	// checkpoint under the lease's fence: a dead letter retried in this
	// process goes through that fence.
	held atomic.Pointer[heldLease]
	// leaseInTx says that the consumer's transactions renew its lease when
	// it is due (a transactional consumer whose lease lives in its store),
	// so that it need not stop when a renewal through the store is late,
	// only when the lease is lost.
	leaseInTx bool
}

// leaseKey is the context key of the lease that a session's (or a
// retry's) work of consumer c runs under. It travels with the work's
// context, as the session's end does, so that each transaction can renew
// the lease it runs under, however deep in the work it is opened; it names
// c, since handlers pass their context on, maybe to another consumer.
type leaseKey struct{ c *Consumer }

func (c *Consumer) withLease(ctx context.Context, l *heldLease) context.Context {
	return context.WithValue(ctx, leaseKey{c}, l)
}

// leaseOf returns the lease that ctx's work of c runs under, if any.
func (c *Consumer) leaseOf(ctx context.Context) *heldLease {
	l, _ := ctx.Value(leaseKey{c}).(*heldLease)
	return l
}

// executor runs the consumer's handler. run calls body once with the
// functions that apply a decoded value, move the checkpoint and resolve a
// dead letter; a transactional executor runs all of body in one transaction
// and keeps its effects only when body returns nil.
type executor interface {
	run(ctx context.Context, body func(s step) error) error
	transactional() bool
	// ownsLetters reports that park and resolve commit with the
	// transaction of run.
	ownsLetters() bool
}

// step is what a batch can do inside [executor.run]: apply a decoded value,
// move the checkpoint, park a dead letter and resolve (delete) one. A
// transactional executor whose store holds the dead letters parks and
// resolves them in its transaction; otherwise park and resolve act at once
// on the dead letter store.
//
// ctx is the context of the run (of its transaction, for a transactional
// executor); apply hands the handler the context it is given, which
// derives from ctx (an event's handle span added).
type step struct {
	ctx     context.Context
	apply   func(ctx context.Context, d codec.Decoded) error
	save    func(expected, next eventstore.Position, fence storekit.Fence) error
	park    func(d eventstore.DeadLetter) (eventstore.DeadLetter, error)
	resolve func(id string) error
}

// claim checks, first thing in a transactional batch, that the checkpoint
// is still at from under fence, with a compare-and-set that moves it
// nowhere: a consumer of the same name in another process (two deployments
// without a lease) that committed first makes it fail at once, before the
// handler writes anything, instead of after the handler ran into the rows
// the winner wrote ("already exists") and was retried. On PostgreSQL the
// write also locks the checkpoint's row, so racing consumers wait for each
// other rather than do the same work twice.
func (s step) claim(from eventstore.Position, fence storekit.Fence) error {
	return s.save(from, from, fence)
}

// New returns a consumer that calls h for every event that opts.Filter
// selects, and keeps its checkpoint in checkpoints under name. Effects are
// at least once: after a crash, the events of the last unsaved batch are
// handled again.
func New(name string, events eventstore.Store, reg *codec.Registry, checkpoints storekit.CheckpointStore, h Handler, opts Options) (*Consumer, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: consumer %q: nil handler", eventstore.ErrInvalidArgument, name)
	}
	c, err := newConsumer(name, events, reg, checkpoints, opts)
	if err != nil {
		return nil, err
	}
	c.exec = plainExecutor{c: c, h: whileLive(h)}
	c.registerGauges(c.opts.DeadLetters)
	return c, nil
}

// NewTx returns a transactional consumer: it runs h on each batch of events
// and moves its checkpoint in one transaction of store, so that a read model
// in the same database counts every event exactly once across crashes.
//
// When the dead letters live in store (store is a
// [storekit.DeadLetterStore], and opts.DeadLetters is nil or store
// itself), an event is parked in the transaction that moves the checkpoint
// past it, and a dead letter retried with [Consumer.RetryDeadLetter] is
// resolved in the transaction of its effect: exactly once around failures
// and crashes too. Dead letters kept in another store are parked from
// inside the transaction, after its checkpoint compare-and-set passed, and
// commit apart from it: when that transaction then fails, the event is
// handled again, and the dead letter goes when that handling succeeds.
func NewTx[Tx any](name string, events eventstore.Store, reg *codec.Registry, store storekit.TxCheckpointStore[Tx], h TxHandler[Tx], opts Options) (*Consumer, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: consumer %q: nil handler", eventstore.ErrInvalidArgument, name)
	}
	c, err := newConsumer(name, events, reg, store, opts)
	if err != nil {
		return nil, err
	}
	dl, own := store.(storekit.DeadLetterStore)
	own = own && (opts.DeadLetters == nil || sameStore(opts.DeadLetters, dl))
	x := txExecutor[Tx]{c: c, store: store, h: whileLiveTx(h), ownDeadLetters: own}
	if leases, ok := store.(storekit.TxLeaseStore[Tx]); ok && c.opts.Leases != nil && sameStore(c.opts.Leases, store) {
		x.leases, c.leaseInTx = leases, true
	}
	c.exec = x
	c.registerGauges(c.opts.DeadLetters)
	return c, nil
}

// sameStore reports whether a and b are one store, without the panic of
// comparing interfaces that hold values of a type that is not comparable.
// A dead letter store passed in Options that is the checkpoint store itself
// must be written in the consumer's transaction: a separate write of it
// would wait for that transaction (SQLite has one writer) or commit apart
// from it.
func sameStore(a, b any) bool {
	ta := reflect.TypeOf(a)
	return ta == reflect.TypeOf(b) && ta.Comparable() && a == b
}

func newConsumer(name string, events eventstore.Store, reg *codec.Registry, checkpoints storekit.CheckpointStore, opts Options) (*Consumer, error) {
	if opts.Exclusive && opts.Leases == nil && checkpoints != nil {
		leases, ok := checkpoints.(storekit.LeaseStore)
		if !ok {
			return nil, &eventstore.InvalidArgumentError{Consumer: name, Index: -1, Field: "lease store",
				Reason: fmt.Sprintf("Options.Exclusive needs Options.Leases, as the checkpoint store (%T) keeps no leases", checkpoints)}
		}
		opts.Leases = leases
	}
	if err := opts.validate(name); err != nil {
		return nil, err
	}
	switch {
	case events == nil || checkpoints == nil:
		return nil, fmt.Errorf("%w: consumer %q needs an event store, a codec registry and a checkpoint store", eventstore.ErrInvalidArgument, name)
	case reg == nil:
		// Only a batch consumer, which decodes nothing, is made without one.
	default:
		if err := reg.Validate(); err != nil {
			return nil, fmt.Errorf("consumer %q: %w", name, err)
		}
	}
	if dl, ok := checkpoints.(storekit.DeadLetterStore); ok && opts.DeadLetters == nil {
		opts.DeadLetters = dl
	}
	return &Consumer{name: name, events: events, reg: reg, checkpoints: checkpoints, opts: opts,
		log: telemetry.Logger(opts.Logger).With(slog.String(telemetry.LogConsumer, name)), tel: newInstruments(name, opts)}, nil
}

// Name returns the consumer's name, under which its checkpoint, dead
// letters and lease are stored.
func (c *Consumer) Name() string { return c.name }

// Filter returns the filter the consumer reads the log with:
// [Options.Filter] as given to [New] or [NewTx] (typically
// [Handlers.Filter]'s), the zero Filter when it reads every event. Its
// checkpoint stays at the last event the filter selected, so the events
// it has left are those after its checkpoint that the filter selects: an
// operator's tool counts them with it. The slices are the caller's copy.
func (c *Consumer) Filter() eventstore.Filter {
	return eventstore.Filter{Types: slices.Clone(c.opts.Filter.Types), StreamPrefixes: slices.Clone(c.opts.Filter.StreamPrefixes)}
}

// Run consumes until ctx ends, then returns nil: it takes the lease (when
// [Options.Exclusive], waiting while another process holds it), resumes
// after the stored checkpoint, catches up and follows live events. When the
// lease is lost, or another consumer moves the checkpoint, it stops applying
// effects and starts over from taking the lease; so it does, after a pause
// that grows while it recurs, when a store is unavailable for a while
// ([eventstore.ErrUnavailable]). It returns an error when the event or
// checkpoint store fails otherwise, or a [*HandlerError] when a handler
// failure stops it ([Stop]).
func (c *Consumer) Run(ctx context.Context) error {
	logCtx, stopLog := context.WithCancel(ctx)
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		c.logStats(logCtx)
	}()
	defer func() {
		stopLog()
		<-logged
	}()
	unavailable := 0 // sessions in a row that ended on an unavailable store
	holder := ""     // the next session's, when the last one could not give its lease up
	for {
		began := time.Now()
		if holder == "" {
			holder = c.sessionHolder()
		}
		kept, err := c.session(ctx, holder, func(ctx context.Context, from eventstore.Position, fence storekit.Fence) error {
			_, err := c.consume(ctx, func(ctx context.Context) iter.Seq2[eventstore.Event, error] {
				return c.events.Subscribe(ctx, from, c.opts.Filter)
			}, from, fence, nil)
			return err
		})
		if !kept {
			// A lease that could not be released (the store is unavailable)
			// is taken again by the next session under its holder, without
			// waiting for it to lapse: no other session uses that name.
			holder = ""
		}
		var handlerErr *HandlerError
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.As(err, &handlerErr):
			// A handler failure that stops the consumer ([Stop]), whatever
			// store sentinel the handler's own error wraps.
			return err
		case errors.Is(err, eventstore.ErrFenced), errors.Is(err, eventstore.ErrCheckpointMoved), errors.Is(err, eventstore.ErrLeaseLost):
			unavailable = 0
			c.log.WarnContext(ctx, "projection: lost ownership; starting over", slog.Any(telemetry.LogError, err))
			if err := c.pause(ctx); err != nil {
				return nil
			}
		case errors.Is(err, eventstore.ErrUnavailable):
			if time.Since(began) > unavailableRetry.Max {
				unavailable = 0 // the store came back for a while
			}
			unavailable++
			wait := unavailableRetry.Delay(unavailable)
			c.log.WarnContext(ctx, "projection: store unavailable; starting over after a pause",
				slog.Any(telemetry.LogError, err), slog.Duration("pause", wait))
			if err := backoff.Wait(ctx, wait); err != nil {
				return nil
			}
		default:
			return err
		}
	}
}

// unavailableRetry spaces the sessions that Run starts over while a store
// is unavailable: a lock another process holds for seconds is usually gone
// within the first pauses; an outage is not hammered.
var unavailableRetry = backoff.Policy{Initial: 100 * time.Millisecond, Max: 5 * time.Second, Multiplier: 2}

// CatchUp consumes every event stored when it starts reading, then
// returns. It takes the lease as Run does; losing it is an error. Another
// consumer of the same name that moved the checkpoint meanwhile (one
// without a lease store, where nothing keeps two apart) makes CatchUp stop
// with an error matching [eventstore.ErrCheckpointMoved] (or, when a newer
// lease holder took over, [eventstore.ErrFenced]), leaving the checkpoint
// where the other moved it: call it again to go on from there. Run does so
// by itself.
func (c *Consumer) CatchUp(ctx context.Context) error {
	_, err := c.session(ctx, c.sessionHolder(), func(ctx context.Context, from eventstore.Position, fence storekit.Fence) error {
		_, err := c.consume(ctx, func(ctx context.Context) iter.Seq2[eventstore.Event, error] {
			return c.events.ReadAll(ctx, from, c.opts.Filter)
		}, from, fence, nil)
		return err
	})
	return err
}

// pause waits a little before a new session, so that two consumers that
// keep taking a checkpoint from each other do not spin.
func (c *Consumer) pause(ctx context.Context) error {
	return backoff.Wait(ctx, c.opts.maxDelay())
}

// session takes the lease (if any) for holder, a name no other session
// uses (see [Consumer.sessionHolder]), claims the checkpoint under its
// fence, runs work from the checkpoint while the lease is kept, and gives
// the lease up. kept reports a lease that could not be given up.
func (c *Consumer) session(ctx context.Context, holder string, work func(ctx context.Context, from eventstore.Position, fence storekit.Fence) error) (kept bool, err error) {
	if c.opts.Leases == nil {
		cp, err := c.checkpoints.Checkpoint(ctx, c.name)
		if err != nil {
			return false, fmt.Errorf("consumer %q: read checkpoint: %w", c.name, err)
		}
		c.stats.setCheckpoint(cp.Position)
		if err := c.claimed(ctx, cp.Position); err != nil {
			return false, err
		}
		return false, work(ctx, cp.Position, cp.Fence)
	}
	lease, err := c.acquire(ctx, holder)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithCancelCause(c.withLease(ctx, lease))
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		c.keep(ctx, cancel, lease)
	}()
	defer func() {
		cancel(nil)
		<-renewed
		kept = c.release(ctx, lease.Lease)
	}()
	from, err := c.claim(ctx, lease.Fence)
	if err == nil {
		err = c.claimed(ctx, from)
	}
	if err == nil {
		c.held.Store(lease)
		defer c.held.Store(nil)
		err = work(ctx, from, lease.Fence)
	}
	if leaseLost(ctx) {
		return false, context.Cause(ctx)
	}
	return false, err
}

// claim reads the checkpoint and saves it unchanged under fence, so that a
// former holder's later saves fail; a save that lands in between is seen
// by reading again.
func (c *Consumer) claim(ctx context.Context, fence storekit.Fence) (eventstore.Position, error) {
	for {
		cp, err := c.checkpoints.Checkpoint(ctx, c.name)
		if err != nil {
			return eventstore.Position{}, fmt.Errorf("consumer %q: read checkpoint: %w", c.name, err)
		}
		err = c.checkpoints.SaveCheckpoint(ctx, c.name, cp.Position, cp.Position, fence)
		if errors.Is(err, eventstore.ErrCheckpointMoved) {
			continue
		}
		if err != nil {
			return eventstore.Position{}, fmt.Errorf("consumer %q: claim checkpoint: %w", c.name, err)
		}
		c.stats.setCheckpoint(cp.Position)
		return cp.Position, nil
	}
}

// claimed runs the consumer's onClaim, if set, for a session that resumes after
// from.
func (c *Consumer) claimed(ctx context.Context, from eventstore.Position) error {
	if c.onClaim == nil {
		return nil
	}
	if err := c.guard(ctx, "OnClaim", nil, func() error { return c.onClaim(ctx, from) }); err != nil {
		return fmt.Errorf("consumer %q: on claim: %w", c.name, err)
	}
	return nil
}

// unit is one stored event and the values it decodes to.
type unit struct {
	ev        eventstore.Event
	parts     []codec.Decoded
	decodeErr error
}

type item struct {
	u   unit
	err error
}

// consume handles the events that open yields in batches until they end
// (it returns nil) or fail, or ctx ends. from is the checkpoint they start
// after; progress, if set, is told how many stored events each batch
// handled, and its error ends consume. open gets a context that ends when
// consume returns, so that a live subscription waiting for the next commit
// lets go at once, rather than holding consume (and the session after it)
// until something is appended.
func (c *Consumer) consume(ctx context.Context, open func(ctx context.Context) iter.Seq2[eventstore.Event, error], from eventstore.Position, fence storekit.Fence, progress func(int) error) (eventstore.Position, error) {
	pend, err := c.pendingLetters(ctx, from)
	if err != nil {
		return from, err
	}
	ctx, cancel := context.WithCancel(ctx)
	size := c.opts.batchSize()
	// Decoding runs in its own goroutine, ahead of the handler, so that
	// catch-up uses a second core.
	ch := make(chan item, size)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.read(ctx, open(ctx), ch)
	}()
	defer func() {
		cancel()
		wg.Wait()
	}()
	c.stats.resetPending()

	batch := make([]unit, 0, size)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var deadline <-chan time.Time
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		next, err := c.flush(ctx, batch, from, fence, pend)
		if err != nil {
			return err
		}
		from = next
		if progress != nil {
			if err := progress(len(batch)); err != nil {
				return err
			}
		}
		clear(batch)
		batch = batch[:0]
		timer.Stop()
		deadline = nil
		return nil
	}
	for {
		select {
		case it, ok := <-ch:
			switch {
			case !ok && ctx.Err() != nil:
				return from, ctx.Err()
			case !ok:
				return from, flush()
			case it.err != nil:
				if ctx.Err() != nil {
					return from, ctx.Err()
				}
				return from, errors.Join(flush(), fmt.Errorf("consumer %q: reading events after %s: %w", c.name, from, it.err))
			}
			batch = append(batch, it.u)
			if len(batch) == 1 {
				timer.Reset(c.opts.maxDelay())
				deadline = timer.C
			}
			if len(batch) >= size || (c.batch != nil && len(ch) == 0) {
				if err := flush(); err != nil {
					return from, err
				}
			}
		case <-deadline:
			if err := flush(); err != nil {
				return from, err
			}
		case <-ctx.Done():
			return from, ctx.Err()
		}
	}
}

// read decodes the events of src and sends them to out, which it closes
// when src ends.
func (c *Consumer) read(ctx context.Context, src iter.Seq2[eventstore.Event, error], out chan<- item) {
	defer close(out)
	for e, err := range src {
		var it item
		if err != nil {
			it.err = err
		} else {
			it.u = unit{ev: e}
			// Cairn's own records (an aggregate's recorded rejections, a
			// saga's step records) have reserved type names that no user
			// codec decodes: they decode to nothing, rather than to a
			// dead letter, and the checkpoint passes them.
			if c.reg != nil && !codec.IsReserved(e.Type) {
				it.u.parts, it.u.decodeErr = c.reg.DecodeAppend(nil, e)
			}
			c.stats.sawEvent(e)
		}
		select {
		case out <- it:
		case <-ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}
