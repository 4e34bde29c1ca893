package aggregate

import (
	"context"
	"log/slog"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/telemetry"
	"github.com/cairn-es/cairn/upcast"
)

// restore returns an instance built from the stream's snapshot, and false
// when there is none or it cannot be trusted. It never fails a load: a
// snapshot store that fails, or a snapshot the codec cannot read (its
// schema version has no upcast path to T's, it is of another type, its data
// is undecodable), is logged and costs a full replay instead.
func (r *Repository[T, PT]) restore(ctx context.Context, id, stream string) (*Instance[T, PT], bool) {
	if r.snaps == nil {
		return nil, false
	}
	snap, ok, err := r.snaps.LoadSnapshot(ctx, stream)
	if err != nil {
		r.log.WarnContext(ctx, "aggregate: cannot load snapshot; replaying the whole stream",
			slog.String(telemetry.LogStream, stream), slog.Any(telemetry.LogError, err))
		return nil, false
	}
	if !ok {
		return nil, false
	}
	state, err := codec.DecodeValueAs[T](r.reg, upcast.Raw{Type: snap.Type, Version: snap.SchemaVersion, Data: snap.Data})
	if err != nil {
		r.log.WarnContext(ctx, "aggregate: discarding snapshot that cannot be decoded; replaying the whole stream",
			slog.String(telemetry.LogStream, stream), slog.Uint64(telemetry.LogVersion, snap.Version),
			slog.String("snapshot_type", snap.Type), slog.Uint64("schema_version", uint64(snap.SchemaVersion)),
			slog.Any(telemetry.LogError, err))
		return nil, false
	}
	inst := r.empty(id, stream)
	*inst.State = state
	inst.Version, inst.Exists = snap.Version, true
	inst.base = snap.Version + 1
	return inst, true
}

// maybeSnapshot saves a snapshot of inst when SnapshotEvery events have
// been applied since the last one. It is best-effort: a failure is logged,
// never returned, because the events are the truth and a snapshot only
// shortens the next load.
func (r *Repository[T, PT]) maybeSnapshot(ctx context.Context, inst *Instance[T, PT]) {
	if r.snaps == nil || !inst.Exists || inst.sinceSnapshot < r.typ.opts.SnapshotEvery {
		return
	}
	inst.sinceSnapshot = 0
	raw, err := r.reg.EncodeValue(inst.State)
	if err == nil {
		err = r.snaps.SaveSnapshot(context.WithoutCancel(ctx), storekit.Snapshot{
			Stream: inst.Stream, Version: inst.Version, Type: raw.Type, SchemaVersion: raw.Version, Data: raw.Data,
		})
	}
	if err != nil {
		r.log.WarnContext(ctx, "aggregate: cannot save snapshot",
			slog.String(telemetry.LogStream, inst.Stream), slog.Uint64(telemetry.LogVersion, inst.Version), slog.Any(telemetry.LogError, err))
	}
}
