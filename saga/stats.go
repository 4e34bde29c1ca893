package saga

import (
	"context"
	"time"

	"github.com/cairn-es/cairn/projection"
)

// Stats are a saga type's figures as this runner sees them.
type Stats struct {
	// Saga is the saga type's name.
	Saga string
	// Handled counts the messages whose handler ran in a step; Duplicates
	// the messages dropped by a watermark; Ignored those for an instance
	// not started or complete, or a deadline no longer pending; Held those
	// kept for their turn; Parked those parked after failing (or, for a
	// stored event, reaching no instance). All since the runner was made.
	Handled, Duplicates, Ignored, Held, Parked int64
	// DeadlinesPending counts the pending deadlines the runner knows of,
	// and NextDeadline is when the soonest is due (zero for none).
	DeadlinesPending int
	NextDeadline     time.Time
	// Gaps counts the open gaps (see [Runner.Gaps]) and OldestGap is when
	// the oldest of them opened (zero for none).
	Gaps      int
	OldestGap time.Time
	// Events and Outbox are the runner's two consumers (checkpoint, lag,
	// rate, lease), once Run or CatchUp has started them.
	Events, Outbox projection.Stats
}

// Stats returns the saga type's figures.
func (r *Runner[S]) Stats(ctx context.Context) (Stats, error) {
	c := r.e.stats
	s := Stats{Saga: r.e.t.name, Handled: c.handled.Load(), Duplicates: c.duplicates.Load(), Ignored: c.ignored.Load(),
		Held: c.held.Load(), Parked: c.parked.Load()}
	s.DeadlinesPending, s.NextDeadline = r.timers.count()
	if gaps := r.gaps.list(); len(gaps) > 0 {
		s.Gaps, s.OldestGap = len(gaps), gaps[0].Since
	}
	if cs := r.consumers.Load(); cs != nil {
		var err error
		if s.Events, err = cs.events.Stats(ctx); err != nil {
			return s, err
		}
		if s.Outbox, err = cs.outbox.Stats(ctx); err != nil {
			return s, err
		}
	}
	return s, nil
}
