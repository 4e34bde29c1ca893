package testserver

import (
	"math"
	"sort"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/shared"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Read serves both count reads and subscriptions, as the server does: the
// count option tells them apart.
func (h *streamsService) Read(req *streams.ReadReq, call streams.Streams_ReadServer) error {
	o := req.GetOptions()
	if o == nil {
		return status.Error(codes.InvalidArgument, "testserver: read without options")
	}
	asString := o.GetUuidOption().GetString_() != nil
	switch o.GetCountOption().(type) {
	case *streams.ReadReq_Options_Subscription:
		return h.subscribe(o, call, asString)
	case *streams.ReadReq_Options_Count:
	default:
		return status.Error(codes.InvalidArgument, "testserver: read without a count or subscription option")
	}
	// The v4 client's count reads always say NoFilter.
	if o.GetFilter() != nil {
		return status.Error(codes.Unimplemented, "testserver: filtered count reads are not imitated")
	}
	if err := h.srv.enter(call.Context(), Read); err != nil {
		return err
	}
	// Only events and StreamNotFound may go out on a count read: the client
	// panics ("unreachable code") on anything else.
	forwards := o.GetReadDirection() == streams.ReadReq_Options_Forwards
	switch so := o.GetStreamOption().(type) {
	case *streams.ReadReq_Options_Stream:
		return h.readStream(call, so.Stream, forwards, o.GetCount(), asString)
	case *streams.ReadReq_Options_All:
		return h.readAll(call, so.All, forwards, o.GetCount(), asString)
	}
	return status.Error(codes.InvalidArgument, "testserver: read of neither a stream nor $all")
}

// readStream honours $tb and $maxCount: events below the first readable
// number are skipped, as if scavenged.
func (h *streamsService) readStream(call streams.Streams_ReadServer, o *streams.ReadReq_Options_StreamOptions, forwards bool, count uint64, asString bool) error {
	name := string(o.GetStreamIdentifier().GetStreamName())
	v, _ := h.srv.store.streamView(name)
	if v.deleted {
		return errStreamDeleted(call.SetTrailer, name)
	}
	if !v.found {
		// Exactly one message, and the client surfaces it on its first Recv.
		return call.Send(&streams.ReadResp{Content: &streams.ReadResp_StreamNotFound_{
			StreamNotFound: &streams.ReadResp_StreamNotFound{
				StreamIdentifier: &shared.StreamIdentifier{StreamName: []byte(name)},
			},
		}})
	}
	last := int64(len(v.events)) - 1
	var from int64
	switch r := o.GetRevisionOption().(type) {
	case *streams.ReadReq_Options_StreamOptions_Revision:
		from = int64(min(r.Revision, math.MaxInt64))
	case *streams.ReadReq_Options_StreamOptions_End:
		from = last
		if forwards {
			from = last + 1
		}
	}
	sent := uint64(0)
	if forwards {
		for n := max(from, v.first); n <= last && sent < count; n++ {
			if err := call.Send(eventResp(v.events[n], asString)); err != nil {
				return err
			}
			sent++
		}
		return nil
	}
	for n := min(from, last); n >= v.first && sent < count; n-- {
		if err := call.Send(eventResp(v.events[n], asString)); err != nil {
			return err
		}
		sent++
	}
	return nil
}

// readAll reads $all from Start, End or a position. Forwards, the event at
// the position is included (positions are the events' pre-positions);
// backwards, reading stops before it, as the server's AllReader does.
// System events are not filtered out: the client cannot ask for a filter.
func (h *streamsService) readAll(call streams.Streams_ReadServer, o *streams.ReadReq_Options_AllOptions, forwards bool, count uint64, asString bool) error {
	all, _ := h.srv.store.allView()
	var i int // first event to send
	switch p := o.GetAllOption().(type) {
	case *streams.ReadReq_Options_AllOptions_Start:
		i = 0
		if !forwards {
			i = -1
		}
	case *streams.ReadReq_Options_AllOptions_End:
		i = len(all)
		if !forwards {
			i = len(all) - 1
		}
	case *streams.ReadReq_Options_AllOptions_Position:
		i = firstAtOrAfter(all, position{commit: p.Position.GetCommitPosition(), prepare: p.Position.GetPreparePosition()})
		if !forwards {
			i--
		}
	default:
		return status.Error(codes.InvalidArgument, "testserver: $all read without a start")
	}
	step := 1
	if !forwards {
		step = -1
	}
	for sent := uint64(0); i >= 0 && i < len(all) && sent < count; i += step {
		if err := call.Send(eventResp(all[i], asString)); err != nil {
			return err
		}
		sent++
	}
	return nil
}

// firstAtOrAfter is the index of the first event at or after p: a binary
// search, since $all is ordered by position.
func firstAtOrAfter(all []*record, p position) int {
	return sort.Search(len(all), func(i int) bool { return !all[i].pos.less(p) })
}
