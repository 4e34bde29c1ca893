package aggregate

import (
	"context"
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/busrepo"
	"github.com/cairn-es/cairn/internal/clip"
	"github.com/cairn-es/cairn/internal/telemetry"
)

// RepositoryOptions configure a [Repository]. The zero value is the
// default.
type RepositoryOptions struct {
	// Snapshots stores the type's snapshots. Nil means the event store
	// itself when it implements [storekit.SnapshotStore], else none (and
	// the type's SnapshotEvery is ignored).
	Snapshots storekit.SnapshotStore
	// Logger receives what the repository handles on its own: snapshots it
	// discards or fails to save. Nil means slog.Default(). Records logged
	// inside a span name its trace (trace_id, span_id).
	Logger *slog.Logger
	// TracerProvider and MeterProvider take the repository's spans and
	// metrics (docs/observability.md lists them); nil means the global
	// providers of go.opentelemetry.io/otel, which do nothing until the
	// service installs an SDK.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	// ScanLimit is ignored.
	//
	// Deprecated: the command bus no longer asks the store whether a new
	// command is an old one: when the instance does not remember it, the
	// append of its decision is refused should its events be stored
	// anywhere in the stream (the [eventstore.Store] contract), and only
	// then, or before returning a decision that appends nothing, does the
	// bus look, without a bound. There is nothing left to bound.
	ScanLimit int
}

// Repository loads and saves the instances of one aggregate type. It holds
// no instance state, and is safe for concurrent use; an [Instance] it
// returns is not.
type Repository[T any, PT Root[T]] struct {
	store eventstore.Store
	reg   *codec.Registry
	typ   *Type[T, PT]
	snaps storekit.SnapshotStore
	log   *slog.Logger
	seed  maphash.Seed // hashes the command IDs its instances track
	// appends traces and times every append: Save's, and the command
	// bus's saves and recorded rejections.
	appends *telemetry.Appends
	// replayers are the replays' loop bodies, each with its method value
	// bound once (see replayer).
	replayers sync.Pool
	// readPage and pageSize are the store's stream page reader, when it
	// hands it out (storekit.PagedStreams): a replay then reads into its
	// replayer's page buffer, without a ReadStream iterator and the
	// pooled buffer it lends. Those were two fifths of the instructions of
	// loading an aggregate that does not exist yet, as saving a new one
	// made with Load does.
	readPage storekit.StreamPageAppender
	pageSize int
}

// NewRepository returns the repository of typ's instances in store, decoding
// and encoding with reg.
//
// It validates reg (see [codec.Registry.Validate], which freezes it: register
// every type and upcaster first), so that a broken set-up, such as an
// upcaster chain with a gap, fails here and not at the first load; the error
// matches [codec.ErrInvalidSetup] and names the aggregate type. When typ asks
// for snapshots and there is a snapshot store, T must be registered with
// reg; otherwise the error matches [ErrSnapshotNotRegistered]. Every event
// type typ has an applier for must be registered with reg too; otherwise
// the error matches [codec.ErrUnregisteredType] and names it.
func NewRepository[T any, PT Root[T]](store eventstore.Store, reg *codec.Registry, typ *Type[T, PT], opts RepositoryOptions) (*Repository[T, PT], error) {
	if store == nil || reg == nil || typ == nil {
		return nil, fmt.Errorf("%w: an aggregate repository needs an event store, a codec registry and an aggregate type", eventstore.ErrInvalidArgument)
	}
	if err := reg.Validate(); err != nil {
		return nil, &TypeError{Name: typ.name, Err: err, Reason: "its codec registry is not set up right: " + err.Error()}
	}
	r := &Repository[T, PT]{store: store, reg: reg, typ: typ, snaps: opts.Snapshots, log: telemetry.Logger(opts.Logger), seed: maphash.MakeSeed(),
		appends: telemetry.NewAppends(telemetry.NewTracer(opts.TracerProvider), telemetry.Meter(opts.MeterProvider), store)}
	r.replayers.New = func() any {
		p := &replayer[T, PT]{r: r}
		p.yield = p.take
		return p
	}
	if r.snaps == nil {
		r.snaps, _ = store.(storekit.SnapshotStore)
	}
	r.readPage, r.pageSize, _ = storekit.StreamPagesOf(store)
	if typ.opts.SnapshotEvery == 0 {
		r.snaps = nil
	}
	if r.snaps != nil {
		if _, _, ok := codec.NameOf[T](reg); !ok {
			var zero T
			return nil, &TypeError{Name: typ.name, Err: ErrSnapshotNotRegistered,
				Reason: "asks for snapshots, but its Go type " + typeName(zero) + " is not registered with the codec"}
		}
	}
	for _, et := range typ.appliers.all() {
		if _, _, ok := reg.NameOfType(et); !ok {
			return nil, &TypeError{Name: typ.name, GoType: et.String(), Err: codec.ErrUnregisteredType,
				Reason: fmt.Sprintf("has an applier for event type %s, which is not registered with the codec: no event of it can be stored or read", et)}
		}
	}
	return r, nil
}

// Load rebuilds instance id from its stream: from its snapshot, when there
// is one it can trust, and the events after it, or from the first event. An
// absent stream gives a new instance with Exists false.
//
// A stored event that cannot be decoded is the codec's [*codec.DecodeError];
// one that Apply rejects (or panics on) is an [*ApplyError]. Both name the
// stream, version and type. A snapshot that cannot be trusted is logged and
// ignored, never an error.
func (r *Repository[T, PT]) Load(ctx context.Context, id string) (*Instance[T, PT], error) {
	if err := r.typ.ValidateID(id); err != nil {
		return nil, err
	}
	return r.load(ctx, id, r.typ.Stream(id))
}

// load is Load of a valid id, whose stream is stream.
func (r *Repository[T, PT]) load(ctx context.Context, id, stream string) (*Instance[T, PT], error) {
	if snap, ok := r.restore(ctx, id, stream); ok {
		inst, err := r.replay(ctx, snap)
		if err != errSnapshotPastEnd {
			return inst, err
		}
		r.log.WarnContext(ctx, "aggregate: snapshot is past the end of its stream; replaying the whole stream",
			slog.String(telemetry.LogStream, stream), slog.Uint64("snapshot_version", snap.Version))
	}
	return r.replay(ctx, r.empty(id, stream))
}

// New returns a new instance of aggregate id, with no events, without
// asking the store: for an aggregate the caller is creating. Its Save
// expects the stream not to exist, so that should it exist after all, the
// save appends nothing and fails with an [*eventstore.WrongVersionError]
// (Load the aggregate then). Load costs a read and answers either way;
// New spares it where the caller knows the aggregate is new, such as one
// whose ID it has just made up.
func (r *Repository[T, PT]) New(id string) (*Instance[T, PT], error) {
	if err := r.typ.ValidateID(id); err != nil {
		return nil, err
	}
	return r.empty(id, r.typ.Stream(id)), nil
}

// refresh is [busrepo.Repo.Refresh]: it applies the events appended to
// inst's stream since inst was loaded or saved.
func (r *Repository[T, PT]) refresh(ctx context.Context, inst *Instance[T, PT]) (*Instance[T, PT], error) {
	if err := checkInstance(inst); err != nil {
		return nil, err
	}
	fresh, err := r.replay(ctx, inst)
	if err == errSnapshotPastEnd {
		return r.Load(ctx, inst.ID)
	}
	return fresh, err
}

// checkInstance refuses an instance that no Load returned: nil, or without
// a stream or a state.
func checkInstance[T any, PT Root[T]](inst *Instance[T, PT]) error {
	bad := func(reason string) error {
		return &eventstore.InvalidArgumentError{Index: -1, Field: "instance", Reason: reason}
	}
	switch {
	case inst == nil:
		return bad("is nil: get instances from Repository.Load")
	case inst.Stream == "" || inst.State == nil || inst.typ == nil:
		return bad(fmt.Sprintf("of aggregate ID %s has no stream or no state: get instances from Repository.Load", clip.Quote(inst.ID)))
	}
	return nil
}

func (r *Repository[T, PT]) empty(id, stream string) *Instance[T, PT] {
	return &Instance[T, PT]{ID: id, Stream: stream, State: r.typ.New(id), seed: r.seed, typ: r.typ}
}

// replay applies the events of inst's stream after inst.Version (or from the
// first when !inst.Exists). An instance restored from a snapshot is checked
// against the stream: the event at its version must exist.
func (r *Repository[T, PT]) replay(ctx context.Context, inst *Instance[T, PT]) (*Instance[T, PT], error) {
	from := uint64(0)
	if inst.Exists {
		from = inst.Version
	}
	p := r.replayers.Get().(*replayer[T, PT])
	p.inst, p.verify = inst, inst.Exists
	if r.readPage != nil {
		storekit.ReadStreamWith(ctx, inst.Stream, eventstore.Forward(from), r.readPage, r.pageSize, &p.page, p.yield)
	} else {
		r.store.ReadStream(ctx, inst.Stream, eventstore.Forward(from))(p.yield)
	}
	err, pastEnd := p.err, p.verify
	p.reset()
	r.replayers.Put(p)
	if err != nil {
		return nil, err
	}
	if pastEnd {
		return nil, errSnapshotPastEnd
	}
	r.maybeSnapshot(ctx, inst)
	return inst, nil
}

// replayer is the body of replay's loop over the stream, as a method:
// ranging with a closure put every variable the body changes on the heap,
// five allocations per load. Replayers are pooled with their method value
// bound, so that a load makes none: a load of an aggregate that does not
// exist yet (every new aggregate's, unless made with New) made two, a
// fifth of the cost of finding nothing. The buffer of an upcast event's
// values is made by the first event that needs it.
type replayer[T any, PT Root[T]] struct {
	r    *Repository[T, PT]
	inst *Instance[T, PT]
	// yield is take, bound once.
	yield func(eventstore.Event, error) bool
	// verify is set until the event at inst's version, which a snapshot
	// restored it to, has been read (and skipped).
	verify bool
	err    error
	buf    []codec.Decoded
	// page is the page buffer of a store that hands out its page reader.
	page storekit.PageBuffer
}

// reset readies p for the pool: it keeps nothing of the replay it ran
// alive (a long upcast's buffer is dropped).
func (p *replayer[T, PT]) reset() {
	clear(p.buf[:cap(p.buf)]) // a longer split may have filled it further than its last length
	p.page.Reset()
	if cap(p.buf) > 64 {
		p.buf = nil
	}
	p.buf, p.inst, p.err, p.verify = p.buf[:0], nil, nil, false
}

func (p *replayer[T, PT]) take(e eventstore.Event, err error) bool {
	switch {
	case err != nil:
		p.err = err
		return false
	case p.verify:
		p.verify = false
		return true
	}
	p.buf, p.err = p.r.apply(p.inst, &e, p.buf[:0], false)
	return p.err == nil
}

// apply decodes one stored event, applies its values to inst, and appends
// them to buf (their Event set only when they were upcast). An event at its
// type's current version, the usual case, is decoded without its
// envelope, which copying into buf for every event of a replay made a
// tenth of a load's cost; its value goes into buf only when values is set
// (a replay, which needs none, then needs no buf at all). A recorded
// rejection (see [busrepo.RejectionType]) is not decoded nor applied: it
// only moves inst's version, and inst remembers its command ID as any
// command's, so that the command is found again.
func (r *Repository[T, PT]) apply(inst *Instance[T, PT], e *eventstore.Event, buf []codec.Decoded, values bool) ([]codec.Decoded, error) {
	if !busrepo.IsRejection(e) {
		v, current, err := r.reg.DecodeCurrent(e)
		if current {
			if err != nil {
				return buf, err
			}
			if values {
				buf = append(buf, codec.Decoded{Value: v, Count: 1})
			}
			return buf, applyValue(inst, e.Version, &e.EventData, v)
		}
		if buf, err = r.reg.DecodeAppend(buf, *e); err != nil {
			return buf, err
		}
		for _, d := range buf {
			if err := inst.apply(d.Value); err != nil {
				return buf, &ApplyError{Stream: e.StreamID, Version: e.Version, Type: d.Event.Type, SchemaVersion: d.Event.SchemaVersion, Err: err}
			}
		}
	}
	applied(inst, e.Version, e.Metadata.CommandID)
	return buf, nil
}

// applyValue applies to inst the value v of e, the event stored in inst's
// stream at version, which decoding e would give (see
// [codec.Registry.RoundTrip]). It takes the event's data, not a whole
// Event, which a save would have to build for each event.
func applyValue[T any, PT Root[T]](inst *Instance[T, PT], version uint64, e *eventstore.EventData, v any) error {
	if err := inst.apply(v); err != nil {
		return &ApplyError{Stream: inst.Stream, Version: version, Type: e.Type, SchemaVersion: e.SchemaVersion, Err: err}
	}
	applied(inst, version, e.Metadata.CommandID)
	return nil
}

// applied moves inst to the stored event at version, of command
// commandID, which it has applied.
func applied[T any, PT Root[T]](inst *Instance[T, PT], version uint64, commandID string) {
	inst.Version, inst.Exists = version, true
	inst.sinceSnapshot++
	inst.track(commandID, version)
}
