package command

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"
	"time"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/backoff"
	"github.com/cairn-es/cairn/internal/busrepo"
	"github.com/cairn-es/cairn/internal/failpoint"
	"github.com/cairn-es/cairn/internal/telemetry"
	"github.com/cairn-es/cairn/retry"
)

// route dispatches the commands of one aggregate type.
type route interface {
	dispatch(ctx context.Context, b *Bus, msg *Message, ct routedType) (Result, error)
	aggregateName() string
}

// Route sends every command of Go type C to aggregate type typ. A command
// type routed twice, two aggregate types with one name, or a command type
// that typ has no handler for (neither bound by [aggregate.Handles] nor the
// Handle of [aggregate.Aggregate]; the error then also matches
// [aggregate.ErrNoHandler]) is a [*RouteError]. Route also validates the bus's codec registry, and freezes
// it (see [aggregate.NewRepository]): a broken set-up, such as an upcaster
// chain with a gap, or a type whose snapshots cannot be encoded, fails here
// rather than at the first Dispatch.
func Route[C Command, T any, PT aggregate.Root[T]](b *Bus, typ *aggregate.Type[T, PT]) error {
	ct := reflect.TypeFor[C]()
	if typ == nil {
		return &eventstore.InvalidArgumentError{Index: -1, Field: "aggregate type",
			Reason: fmt.Sprintf("for command type %s is nil", ct)}
	}
	if ct.Kind() == reflect.Interface {
		return &RouteError{CommandType: ct.String(), Aggregate: typ.Name(),
			Reason: "is an interface type; commands are routed by their concrete Go type"}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if prev, ok := b.routes[ct]; ok {
		return &RouteError{CommandType: ct.String(), Aggregate: typ.Name(),
			Reason: fmt.Sprintf("the command type is already routed to aggregate %q", prev.route.aggregateName())}
	}
	if prev, ok := b.types[typ.Name()]; ok && prev != any(typ) {
		return &RouteError{CommandType: ct.String(), Aggregate: typ.Name(),
			Reason: "another aggregate type has the same name, so they would share streams"}
	}
	if !busrepo.CanHandle(typ, ct) {
		var zero T
		return &RouteError{CommandType: ct.String(), Aggregate: typ.Name(), Err: aggregate.ErrNoHandler,
			Reason: fmt.Sprintf("the aggregate type has no handler for it (see aggregate.Handles), and *%T does not implement aggregate.Aggregate", zero)}
	}
	r := b.repos[typ]
	if r == nil {
		repo, err := aggregate.NewRepository(b.store, b.reg, typ, aggregate.RepositoryOptions{Snapshots: b.opts.Snapshots, Logger: b.log,
			TracerProvider: b.opts.TracerProvider, MeterProvider: b.opts.MeterProvider})
		if err != nil {
			return err
		}
		r = &typedRoute[T, PT]{typ: typ, bus: busrepo.For[*aggregate.Instance[T, PT]](repo)}
		b.repos[typ] = r
		b.types[typ.Name()] = typ
	}
	name := b.nameOf(ct)
	b.routes[ct] = routedType{route: r, name: name, tel: newCommandTelemetry(typeName(ct, name), typ.Name())}
	return nil
}

// typedRoute dispatches to the aggregates of typ, through the bus's view
// of its repository.
type typedRoute[T any, PT aggregate.Root[T]] struct {
	typ *aggregate.Type[T, PT]
	bus busrepo.Repo[*aggregate.Instance[T, PT]]
}

func (r *typedRoute[T, PT]) aggregateName() string { return r.typ.Name() }

func (r *typedRoute[T, PT]) dispatch(ctx context.Context, b *Bus, msg *Message, ct routedType) (Result, error) {
	name := ct.name
	id, err := aggregateID(msg.Command)
	if err != nil {
		return Result{CommandID: msg.ID}, err
	}
	stream := r.typ.Stream(id)
	res := Result{AggregateID: id, Stream: stream, CommandID: msg.ID}
	if err := r.typ.ValidateID(id); err != nil {
		return res, fmt.Errorf("command %T: %w", msg.Command, err)
	}
	held, err := b.locks.Lock(ctx, stream)
	if err != nil {
		return res, err
	}
	defer held.Unlock()

	md := eventstore.Metadata{CorrelationID: msg.CorrelationID, CausationID: msg.CausationID, Extra: msg.Extra}
	if md.CorrelationID == "" {
		md.CorrelationID = msg.ID
	}
	if md.CausationID == "" {
		md.CausationID = msg.ID
	}
	// exact is set once the instance could not tell whether the command
	// is new and an append was then refused: the command may be an old one,
	// whose events the store found by their IDs.
	// refresh is set once a decision on a cached instance appended
	// nothing: the next one is made on the stream as it is.
	exact, refresh := false, false
	for attempt := 1; ; attempt++ {
		res.Attempts = attempt
		inst, current, err := r.tracedLoad(ctx, b, ct.tel, id, stream, refresh)
		if err != nil {
			return res, err
		}
		var prior busrepo.Outcome
		found, certain := false, true
		if exact {
			prior, found, err = r.bus.PriorOutcome(ctx, inst, msg.ID)
		} else {
			prior, found, certain, err = r.bus.RecentOutcome(ctx, inst, msg.ID)
		}
		if err != nil {
			return res, err
		}
		if found {
			b.cache.Put(stream, inst)
			return b.priorResult(ctx, res, prior, name)
		}
		events, err := r.decide(ctx, b, ct.tel, inst, msg.Command)
		hit(failpoint.BusAfterDecide)
		if !current && appendsNothing(msg, events, err) {
			// The cached state may be one that another process has moved
			// past. A decision that appends is checked by the append's
			// expected version; this one is not, so it is made again on
			// the stream as it is. A Handle that panicked may also have
			// left the cached state half-changed: it is loaded anew.
			if errors.Is(err, aggregate.ErrPanicked) {
				b.cache.Evict(stream)
			}
			refresh = true
			attempt-- // deciding again on current state is not a retry
			continue
		}
		if !certain && (err != nil || len(events) == 0) {
			// A rejection or a no-op appends nothing, so no store would
			// refuse it: ask the store before returning it, for the
			// command may have produced events long ago.
			if prior, found, perr := r.bus.PriorOutcome(ctx, inst, msg.ID); perr != nil || found {
				b.cache.Evict(stream) // Handle may have panicked half-way
				if perr != nil {
					return res, perr
				}
				return b.priorResult(ctx, res, prior, name)
			}
		}
		if errors.Is(err, aggregate.ErrPanicked) {
			b.cache.Evict(stream) // a Handle that panicked may have left the state half-changed
			return res, err
		}
		if err != nil && !msg.RecordRejection {
			b.cache.Put(stream, inst)
			res.Rejected = true
			return res, err
		}
		if err == nil && len(events) == 0 {
			b.cache.Put(stream, inst)
			res.Version = inst.Version
			return res, nil
		}
		// Append the decision: the events, or the rejection to record. Both
		// expect the loaded version, so a success and a rejection of one
		// command ID racing in two dispatches cannot both be appended.
		var out busrepo.Outcome
		opts := busrepo.SaveOptions{CommandID: msg.ID, Metadata: md, CommandType: name.name}
		rejection := err
		hit(failpoint.BusBeforeAppend)
		if rejection != nil {
			out, err = r.recordRejection(ctx, b.reg, inst, msg, opts, rejection)
		} else {
			out, err = r.bus.Save(ctx, inst, events, opts)
		}
		hit(failpoint.BusAfterAppend)
		if err == nil {
			b.cache.Put(stream, inst)
			if out.Duplicate {
				return b.priorResult(ctx, res, out, name) // another dispatch's outcome came first
			}
			if rejection != nil {
				res.Version, res.Position, res.Rejected = out.LastVersion, out.Position, true
				return res, rejection
			}
			res.Version, res.Position, res.Events = out.LastVersion, out.Position, out.Events
			return res, nil
		}
		// The instance is stale, or its state or the append's outcome is
		// uncertain: the next dispatch must load it again.
		b.cache.Evict(stream)
		if out.Events != nil {
			res.Version, res.Position, res.Events = out.LastVersion, out.Position, out.Events
			return res, err
		}
		if !errors.Is(err, eventstore.ErrWrongVersion) && !errors.Is(err, eventstore.ErrEventIDConflict) {
			return res, err
		}
		// When the instance could not tell, a refusal may be the store
		// finding the command's own event IDs: the next attempt asks it.
		// Two refusals say nothing of a writer racing this dispatch, and
		// are not retries (no backoff, no attempt spent): one of a
		// decision made on a cached state, which the stream had passed
		// (the next decision is made on the stream as it is), and one of
		// the command's own event IDs when the instance could not tell
		// whether it is new (the next attempt looks it up). Each happens
		// once at most: the instance is loaded afresh after the first,
		// and the lookup is exact after the second.
		free := !current || (!certain && !exact && errors.Is(err, eventstore.ErrEventIDConflict))
		exact = exact || !certain
		if free {
			attempt--
			continue
		}
		if attempt >= b.opts.Retry.Attempts {
			return res, &ContentionError{Stream: stream, CommandID: msg.ID, Attempts: attempt, Err: err}
		}
		b.tel.retried(ctx, ct.tel, attempt+1, err)
		b.log.DebugContext(ctx, "command: version conflict; deciding again",
			slog.String(telemetry.LogStream, stream), slog.String(telemetry.LogCommandID, msg.ID), slog.String(telemetry.LogCommandType, ct.tel.name),
			slog.Int("attempt", attempt), slog.Any(telemetry.LogError, err))
		if werr := backoff.Wait(ctx, delay(b.opts.Retry, attempt)); werr != nil {
			return res, werr
		}
	}
}

// aggregateID calls the command's AggregateID, turning a panic (a nil
// pointer command, say) into an error.
func aggregateID(cmd Command) (id string, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &aggregate.PanicError{Method: fmt.Sprintf("AggregateID of %T", cmd), Value: v, Stack: debug.Stack()}
		}
	}()
	return cmd.AggregateID(), nil
}

// appendsNothing reports whether a decision leaves the stream as it is,
// so that no version check would reveal that it was made on a stale state:
// a rejection that is not recorded, an accepted no-op, or a panic.
func appendsNothing(msg *Message, events []any, err error) bool {
	if err != nil {
		return !msg.RecordRejection || errors.Is(err, aggregate.ErrPanicked)
	}
	return len(events) == 0
}

// tracedLoad is load, under a `load {aggregate}` span while the dispatch
// records.
func (r *typedRoute[T, PT]) tracedLoad(ctx context.Context, b *Bus, tel *commandTelemetry, id, stream string, refresh bool) (inst *aggregate.Instance[T, PT], current bool, err error) {
	lctx, span := b.tel.child(ctx, tel.loadName)
	inst, cached, current, err := r.load(lctx, b, id, stream, refresh)
	if span != nil {
		span.SetAttributes(telemetry.StreamKey.String(stream), telemetry.CachedKey.Bool(cached))
	}
	endChild(span, err)
	return inst, current, err
}

// load returns the cached instance of stream, or loads it; cached says
// which. A cached instance is brought up to date with the events others
// appended since only when refresh is set; current reports whether inst
// is the stream as it is now, loaded or refreshed. The bus decides on a
// cached state as it is, for the append of a decision expects its version
// and fails when the stream has moved on (see appendsNothing for the
// decisions that append nothing).
func (r *typedRoute[T, PT]) load(ctx context.Context, b *Bus, id, stream string, refresh bool) (inst *aggregate.Instance[T, PT], cached, current bool, err error) {
	held, _ := b.cache.Get(stream)
	if inst, ok := held.(*aggregate.Instance[T, PT]); ok {
		if !refresh {
			return inst, true, false, nil
		}
		fresh, err := r.bus.Refresh(ctx, inst)
		if err != nil {
			b.cache.Evict(stream) // partly refreshed: no longer a state of the stream
			return nil, true, false, err
		}
		return fresh, true, true, nil
	}
	inst, err = r.bus.Load(ctx, id, stream)
	return inst, false, true, err
}

// decide lets inst decide cmd, under a `decide {command type}` span while
// the dispatch records. A rejection is the command's outcome, not a
// failure of the span; a Handle that panicked is.
func (r *typedRoute[T, PT]) decide(ctx context.Context, b *Bus, tel *commandTelemetry, inst *aggregate.Instance[T, PT], cmd Command) ([]any, error) {
	dctx, span := b.tel.child(ctx, tel.decideName)
	events, err := inst.Handle(dctx, cmd)
	if span != nil {
		var failed error
		if errors.Is(err, aggregate.ErrPanicked) {
			failed = err
		}
		endChild(span, failed)
	}
	return events, err
}

// delay is how long p waits before the retry after attempt failed.
func delay(p retry.Policy, attempt int) time.Duration {
	return backoff.Of(p).Delay(attempt)
}
