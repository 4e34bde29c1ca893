package testserver

import (
	"errors"
	"io"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/shared"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// streamsService is the Streams gRPC service. BatchAppend stays
// unimplemented: the client uses it only when ServerFeatures lists it, and
// this server registers no ServerFeatures.
type streamsService struct {
	streams.UnimplementedStreamsServer
	srv *Server
}

// Append reads the options, then every proposed event, and answers once:
// Success, WrongExpectedVersion, or an error status.
func (h *streamsService) Append(call streams.Streams_AppendServer) error {
	ctx := call.Context()
	first, err := call.Recv()
	if err != nil {
		return err
	}
	opts := first.GetOptions()
	if opts == nil {
		return status.Error(codes.InvalidArgument, "testserver: the first append message must carry options")
	}
	name := string(opts.GetStreamIdentifier().GetStreamName())
	expected, ok := expectedFromAppend(opts)
	if !ok {
		return status.Error(codes.InvalidArgument, "testserver: append without an expected stream revision")
	}

	// Read every message before refusing any: if the server returned while
	// the client still sends, the client would see a bare EOF from Send
	// instead of the status.
	var evs []proposed
	var refused error
	size := 0
	for {
		req, err := call.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if refused != nil {
			continue
		}
		var e proposed
		if e, refused = h.proposed(call, req.GetProposedMessage()); refused != nil {
			continue
		}
		if size += len(e.typ) + len(e.data) + len(e.meta); size > h.srv.maxSize {
			refused = errAppendTooLarge(call.SetTrailer, h.srv.maxSize)
			continue
		}
		evs = append(evs, e)
	}
	if refused != nil {
		return refused
	}
	if err := h.srv.enter(ctx, Append); err != nil {
		return err
	}

	lost := h.srv.takeDisconnect()
	if lost == BeforeCommit {
		h.srv.cut(ctx)
		return status.Error(codes.Unavailable, "testserver: connection lost before the commit")
	}
	out := h.srv.store.appendEvents(name, expected, evs)
	if lost == AfterCommit {
		h.srv.cut(ctx)
		return status.Error(codes.Unavailable, "testserver: connection lost after the commit")
	}

	switch out.decision {
	case decideDeleted:
		return errStreamDeleted(call.SetTrailer, name)
	case decideWrongVersion:
		return call.SendAndClose(&streams.AppendResp{Result: &streams.AppendResp_WrongExpectedVersion_{
			WrongExpectedVersion: wrongVersionResp(opts, out.cur),
		}})
	}
	// A repeat answers exactly like the original write: the client cannot
	// tell them apart, on a real server neither.
	success := &streams.AppendResp_Success{}
	if out.last < 0 {
		success.CurrentRevisionOption = &streams.AppendResp_Success_NoStream{NoStream: &shared.Empty{}}
	} else {
		success.CurrentRevisionOption = &streams.AppendResp_Success_CurrentRevision{CurrentRevision: uint64(out.last)}
	}
	if out.pos == nil {
		success.PositionOption = &streams.AppendResp_Success_NoPosition{NoPosition: &shared.Empty{}}
	} else {
		success.PositionOption = &streams.AppendResp_Success_Position{Position: &streams.AppendResp_Position{
			CommitPosition: out.pos.commit, PreparePosition: out.pos.prepare,
		}}
	}
	return call.SendAndClose(&streams.AppendResp{Result: &streams.AppendResp_Success_{Success: success}})
}

// proposed validates one proposed event as the server does: `type` and
// `content-type` are required, and only application/json counts as JSON.
func (h *streamsService) proposed(call streams.Streams_AppendServer, m *streams.AppendReq_ProposedMessage) (proposed, error) {
	if m == nil {
		return proposed{}, status.Error(codes.InvalidArgument, "testserver: expected a proposed message after the options")
	}
	typ, ok := m.GetMetadata()["type"]
	if !ok {
		return proposed{}, errMissingMetadata(call.SetTrailer, "type")
	}
	ct, ok := m.GetMetadata()["content-type"]
	if !ok {
		return proposed{}, errMissingMetadata(call.SetTrailer, "content-type")
	}
	id, err := uuidFromProto(m.GetId())
	if err != nil {
		return proposed{}, status.Errorf(codes.InvalidArgument, "testserver: bad event id: %v", err)
	}
	data, meta := m.GetData(), m.GetCustomMetadata()
	if data == nil {
		data = []byte{}
	}
	if meta == nil {
		meta = []byte{}
	}
	return proposed{id: id, typ: typ, json: ct == contentJSON, data: data, meta: meta}, nil
}

func expectedFromAppend(o *streams.AppendReq_Options) (int64, bool) {
	switch v := o.GetExpectedStreamRevision().(type) {
	case *streams.AppendReq_Options_Revision:
		return int64(v.Revision), true
	case *streams.AppendReq_Options_NoStream:
		return expectNoStream, true
	case *streams.AppendReq_Options_Any:
		return expectAny, true
	case *streams.AppendReq_Options_StreamExists:
		return expectStreamExists, true
	}
	return 0, false
}

// wrongVersionResp fills only the fields the v4 client reads (6-11); the
// legacy _20_6_0 ones stay unset, so a client that read them would fail
// here.
func wrongVersionResp(o *streams.AppendReq_Options, cur int64) *streams.AppendResp_WrongExpectedVersion {
	w := &streams.AppendResp_WrongExpectedVersion{}
	if cur < 0 {
		w.CurrentRevisionOption = &streams.AppendResp_WrongExpectedVersion_CurrentNoStream{CurrentNoStream: &shared.Empty{}}
	} else {
		w.CurrentRevisionOption = &streams.AppendResp_WrongExpectedVersion_CurrentRevision{CurrentRevision: uint64(cur)}
	}
	switch v := o.GetExpectedStreamRevision().(type) {
	case *streams.AppendReq_Options_Revision:
		w.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedRevision{ExpectedRevision: v.Revision}
	case *streams.AppendReq_Options_NoStream:
		w.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedNoStream{ExpectedNoStream: &shared.Empty{}}
	case *streams.AppendReq_Options_Any:
		w.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedAny{ExpectedAny: &shared.Empty{}}
	case *streams.AppendReq_Options_StreamExists:
		w.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedStreamExists{ExpectedStreamExists: &shared.Empty{}}
	}
	return w
}
