package testserver

import (
	"context"
	"fmt"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/shared"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// softDeleteMeta is what the server writes into $$stream on a soft delete:
// the whole metadata is replaced, so $maxCount and the rest are gone too.
var softDeleteMeta = fmt.Appendf(nil, `{"$tb":%d}`, deletedStream)

// deleteOutcome is a delete's or tombstone's result.
type deleteOutcome struct {
	decision decision
	cur      int64
	pos      position
}

// deleteStream is the server's WriteDelete. The expected version is checked
// like an append of one fresh event ID. A soft delete then writes $tb =
// DeletedStream into $$name: reads answer StreamNotFound, and a later
// append continues the numbering. A tombstone writes a $streamDeleted event
// with number 2^63-1 into the stream itself: everything after fails with
// stream-deleted.
func (st *store) deleteStream(name string, expected int64, hard bool) deleteOutcome {
	st.mu.Lock()
	defer st.mu.Unlock()
	chk := st.checkLocked(name, expected, []uuid.UUID{uuid.New()})
	switch chk.decision {
	case decideDeleted:
		return deleteOutcome{decision: decideDeleted, cur: chk.cur}
	case decideWrongVersion, decideIdempotent: // a fresh ID never repeats
		return deleteOutcome{decision: decideWrongVersion, cur: chk.cur}
	}
	var r *record
	if hard {
		r = &record{
			stream: name, rev: deletedStream, id: uuid.New(), typ: "$streamDeleted",
			data: []byte{}, meta: []byte{}, created: st.now().UnixNano() / 100,
			pos: position{commit: st.offset, prepare: st.offset},
		}
		st.offset += recordOverhead + uint64(len(name)+len(r.typ))
		st.ensureLocked(name).tombstone = r
		st.all = append(st.all, r)
		st.ids[r.id] = idRef{stream: name, rev: r.rev}
	} else {
		// Deleting what never existed is a wrong version, even with Any.
		if st.lastNumberLocked(name) < 0 && st.lastNumberLocked("$$"+name) < 0 {
			return deleteOutcome{decision: decideWrongVersion, cur: noEvents}
		}
		r = st.systemWriteLocked("$$"+name, "$metadata", softDeleteMeta)
	}
	st.publishLocked()
	return deleteOutcome{decision: decideWrite, cur: chk.cur, pos: r.pos}
}

// Delete is a soft delete.
func (h *streamsService) Delete(ctx context.Context, req *streams.DeleteReq) (*streams.DeleteResp, error) {
	o := req.GetOptions()
	exp, ok := expectedFromDelete(o.GetExpectedStreamRevision())
	pos, err := h.delete(ctx, Delete, o.GetStreamIdentifier(), exp, ok, false)
	if err != nil {
		return nil, err
	}
	return &streams.DeleteResp{PositionOption: &streams.DeleteResp_Position_{Position: &streams.DeleteResp_Position{
		CommitPosition: pos.commit, PreparePosition: pos.prepare,
	}}}, nil
}

// Tombstone is a hard delete.
func (h *streamsService) Tombstone(ctx context.Context, req *streams.TombstoneReq) (*streams.TombstoneResp, error) {
	o := req.GetOptions()
	exp, ok := expectedFromDelete(o.GetExpectedStreamRevision())
	pos, err := h.delete(ctx, Tombstone, o.GetStreamIdentifier(), exp, ok, true)
	if err != nil {
		return nil, err
	}
	return &streams.TombstoneResp{PositionOption: &streams.TombstoneResp_Position_{Position: &streams.TombstoneResp_Position{
		CommitPosition: pos.commit, PreparePosition: pos.prepare,
	}}}, nil
}

func (h *streamsService) delete(ctx context.Context, c Call, id *shared.StreamIdentifier, exp int64, ok, hard bool) (position, error) {
	if !ok {
		return position{}, status.Error(codes.InvalidArgument, "testserver: delete without an expected stream revision")
	}
	if err := h.srv.enter(ctx, c); err != nil {
		return position{}, err
	}
	name := string(id.GetStreamName())
	setTrailer := func(md metadata.MD) { _ = grpc.SetTrailer(ctx, md) }
	out := h.srv.store.deleteStream(name, exp, hard)
	switch out.decision {
	case decideDeleted:
		return position{}, errStreamDeleted(setTrailer, name)
	case decideWrongVersion:
		return position{}, errDeleteWrongVersion(setTrailer, name, exp, out.cur)
	}
	return out.pos, nil
}

// expectedFromDelete reads the expected revision of a DeleteReq or a
// TombstoneReq: distinct generated types of the same shape.
func expectedFromDelete(v any) (int64, bool) {
	switch v := v.(type) {
	case *streams.DeleteReq_Options_Revision:
		return int64(v.Revision), true
	case *streams.TombstoneReq_Options_Revision:
		return int64(v.Revision), true
	case *streams.DeleteReq_Options_NoStream, *streams.TombstoneReq_Options_NoStream:
		return expectNoStream, true
	case *streams.DeleteReq_Options_Any, *streams.TombstoneReq_Options_Any:
		return expectAny, true
	case *streams.DeleteReq_Options_StreamExists, *streams.TombstoneReq_Options_StreamExists:
		return expectStreamExists, true
	}
	return 0, false
}
