package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/saga"
)

// The stages of a parcel, in the order the carrier scans them.
var stages = []string{"picked up", "in transit", "out for delivery", "delivered"}

// ParcelScanned is the carrier's event, on its topic: the parcel of one of
// our orders was scanned at a stage.
type ParcelScanned struct {
	Parcel string `json:"parcel"`
	Order  string `json:"order"`
	Stage  int    `json:"stage"`
	Where  string `json:"where"`
}

// TrackParcel is the command the tracking saga sends our order for each scan.
type TrackParcel struct {
	Order string
	Stage int
	Where string
}

// AggregateID implements command.Command.
func (c TrackParcel) AggregateID() string { return c.Order }

// ParcelTracked records a stage of the order's delivery.
type ParcelTracked struct {
	Stage int    `json:"stage"`
	Where string `json:"where"`
}

// ErrStageOutOfOrder refuses a stage that is not the next one: what a
// subscriber that handled the topic as it came (duplicated, out of order)
// would run into.
var ErrStageOutOfOrder = errors.New("delivery stage out of order")

// Order is our side: an order whose delivery advances one stage at a time.
type Order struct {
	Stages []int // in the order they were recorded
}

// Track decides.
func (o *Order) Track(_ context.Context, c TrackParcel) ([]any, error) {
	if c.Stage != len(o.Stages) {
		return nil, fmt.Errorf("%w: stage %d after %d stages", ErrStageOutOfOrder, c.Stage, len(o.Stages))
	}
	return []any{ParcelTracked{Stage: c.Stage, Where: c.Where}}, nil
}

// Tracked evolves.
func (o *Order) Tracked(e ParcelTracked) { o.Stages = append(o.Stages, e.Stage) }

// Tracking is the saga's state, one instance per parcel.
type Tracking struct {
	Order  string `json:"order"`
	Scans  int    `json:"scans"`
	Latest string `json:"latest"`
}

// declareTracking declares the saga: every scan of a parcel becomes a
// TrackParcel for its order, in the parcel's sequence, and the delivered scan
// completes the instance.
func declareTracking(t *saga.Type[Tracking]) error {
	err := saga.Sends[Tracking, TrackParcel](t)
	if err != nil {
		return err
	}
	return saga.On(t, saga.Event[Tracking, ParcelScanned]{
		Instance: func(e ParcelScanned, _ eventstore.Metadata) string { return e.Parcel },
		Starts:   true,
		Handle: func(_ context.Context, s *Tracking, e ParcelScanned, out *saga.Output) error {
			if e.Stage < 0 || e.Stage >= len(stages) {
				return fmt.Errorf("parcel %s: no stage %d", e.Parcel, e.Stage)
			}
			s.Order, s.Latest = e.Order, stages[e.Stage]
			s.Scans++
			out.Send(TrackParcel{Order: e.Order, Stage: e.Stage, Where: e.Where})
			if e.Stage == len(stages)-1 {
				out.Complete()
			}
			return nil
		},
	})
}
