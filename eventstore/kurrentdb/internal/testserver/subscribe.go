package testserver

import (
	"context"
	"math"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// subscribe serves a catch-up subscription: Confirmation first (the client
// fails the subscription otherwise), then the stored events after the
// start, CaughtUp, then live events as they are written. Writers wake it
// through the store's changed channel; nothing polls.
func (h *streamsService) subscribe(o *streams.ReadReq_Options, call streams.Streams_ReadServer, asString bool) error {
	if o.GetReadDirection() != streams.ReadReq_Options_Forwards {
		return status.Error(codes.InvalidArgument, "testserver: subscriptions read forwards only")
	}
	ctx := call.Context()
	if err := h.srv.enter(ctx, Subscribe); err != nil {
		return err
	}
	sub := &subscription{call: call, ctx: ctx, drop: h.srv.dropChan(), asString: asString}
	switch so := o.GetStreamOption().(type) {
	case *streams.ReadReq_Options_All:
		f, err := newFilter(o.GetFilter())
		if err != nil {
			return err
		}
		return sub.all(h.srv.store, so.All, f)
	case *streams.ReadReq_Options_Stream:
		if o.GetFilter() != nil {
			return status.Error(codes.InvalidArgument, "testserver: a stream subscription takes no filter")
		}
		return sub.stream(h.srv.store, so.Stream)
	}
	return status.Error(codes.InvalidArgument, "testserver: subscription to neither a stream nor $all")
}

type subscription struct {
	call     streams.Streams_ReadServer
	ctx      context.Context
	drop     <-chan struct{}
	asString bool
}

func (s *subscription) confirm() error {
	return s.call.Send(&streams.ReadResp{Content: &streams.ReadResp_Confirmation{
		Confirmation: &streams.ReadResp_SubscriptionConfirmation{SubscriptionId: uuid.NewString()},
	}})
}

func (s *subscription) caughtUp() error {
	return s.call.Send(&streams.ReadResp{Content: &streams.ReadResp_CaughtUp_{CaughtUp: &streams.ReadResp_CaughtUp{}}})
}

func (s *subscription) send(r *record) error {
	if err := s.interrupted(); err != nil {
		return err
	}
	return s.call.Send(eventResp(r, s.asString))
}

// interrupted reports a drop or a cancelled call without waiting, so that a
// long catch-up stops as soon as a live one would.
func (s *subscription) interrupted() error {
	select {
	case <-s.drop:
		return errDropped
	case <-s.ctx.Done():
		return status.FromContextError(s.ctx.Err()).Err()
	default:
		return nil
	}
}

// wait blocks until the next write, a drop, or the end of the call.
func (s *subscription) wait(changed <-chan struct{}) error {
	select {
	case <-changed:
		return nil
	case <-s.drop:
		return errDropped
	case <-s.ctx.Done():
		return status.FromContextError(s.ctx.Err()).Err()
	}
}

var errDropped = status.Error(codes.Unavailable, "testserver: subscription dropped")

// all follows $all. A start position is exclusive: the subscription begins
// with the first event after it.
func (s *subscription) all(st *store, o *streams.ReadReq_Options_AllOptions, f *filter) error {
	all, _ := st.allView()
	var next int
	switch p := o.GetAllOption().(type) {
	case *streams.ReadReq_Options_AllOptions_Start:
		next = 0
	case *streams.ReadReq_Options_AllOptions_End:
		next = len(all)
	case *streams.ReadReq_Options_AllOptions_Position:
		from := position{commit: p.Position.GetCommitPosition(), prepare: p.Position.GetPreparePosition()}
		next = firstAtOrAfter(all, from)
		if next < len(all) && all[next].pos == from {
			next++
		}
	default:
		return status.Error(codes.InvalidArgument, "testserver: $all subscription without a start")
	}
	if err := s.confirm(); err != nil {
		return err
	}
	scanned, caughtUp := 0, false
	for {
		all, changed := st.allView()
		for ; next < len(all); next++ {
			r := all[next]
			if f == nil || f.match(r) {
				if err := s.send(r); err != nil {
					return err
				}
			}
			if f == nil {
				continue
			}
			// A checkpoint every window × multiplier events scanned, matching
			// or not, so that a sparse filter still lets the client move on.
			if scanned++; scanned >= f.checkpointEvery {
				scanned = 0
				if err := s.checkpoint(r.pos); err != nil {
					return err
				}
			}
		}
		if err := s.idle(&caughtUp, changed); err != nil {
			return err
		}
	}
}

// checkpoint sends a position just past the last event scanned: strictly
// between it and the next event (prepares are at least recordOverhead
// apart), and not the position of any event. Real servers send such
// positions too; an adapter must not assume a checkpoint names an event.
func (s *subscription) checkpoint(last position) error {
	return s.call.Send(&streams.ReadResp{Content: &streams.ReadResp_Checkpoint_{Checkpoint: &streams.ReadResp_Checkpoint{
		CommitPosition: last.commit, PreparePosition: last.prepare + 1,
	}}})
}

// stream follows one stream. Start begins at its first readable event,
// Revision(n) after n, End after its last. A tombstone ends the
// subscription with stream-deleted; a soft-deleted stream sends nothing
// until it is written again.
func (s *subscription) stream(st *store, o *streams.ReadReq_Options_StreamOptions) error {
	name := string(o.GetStreamIdentifier().GetStreamName())
	v, _ := st.streamView(name)
	var next int64
	switch r := o.GetRevisionOption().(type) {
	case *streams.ReadReq_Options_StreamOptions_Start:
		next = 0
	case *streams.ReadReq_Options_StreamOptions_Revision:
		next = int64(min(r.Revision, math.MaxInt64-1)) + 1
	case *streams.ReadReq_Options_StreamOptions_End:
		next = v.last + 1
	default:
		return status.Error(codes.InvalidArgument, "testserver: stream subscription without a start")
	}
	if err := s.confirm(); err != nil {
		return err
	}
	caughtUp := false
	for {
		v, changed := st.streamView(name)
		if v.deleted {
			return errStreamDeleted(s.call.SetTrailer, name)
		}
		if v.found {
			for next = max(next, v.first); next <= v.last; next++ {
				if err := s.send(v.events[next]); err != nil {
					return err
				}
			}
		}
		if err := s.idle(&caughtUp, changed); err != nil {
			return err
		}
	}
}

// idle tells the client, the first time, that the subscription has caught
// up, then waits for the log to change.
func (s *subscription) idle(caughtUp *bool, changed <-chan struct{}) error {
	if !*caughtUp {
		*caughtUp = true
		if err := s.caughtUp(); err != nil {
			return err
		}
	}
	return s.wait(changed)
}
