package saga

import (
	"context"
	"slices"
	"time"

	"github.com/cairn-es/cairn/projection"
)

// Stats are a saga type's figures as this runner sees them.
type Stats struct {
	// Saga is the saga type's name.
	Saga string
	// Handled counts the messages whose handler ran in a step; Duplicates
	// the messages dropped by a watermark, or whose step another runner
	// had stored already; Ignored those for an instance not started or
	// complete, or a deadline no longer pending; Held those kept for their
	// turn; Parked those parked after failing (or, for a stored event,
	// reaching no instance). All since the runner was made: what is parked
	// or held now is ParkedInstances and HeldMessages.
	Handled, Duplicates, Ignored, Held, Parked int64
	// ParkedInstances counts the instances parked on a message now (see
	// [Runner.Parked]), and OldestParked is when the longest parked of
	// them parked (zero for none). HeldMessages counts the deliveries and
	// rejections instances hold now, behind a gap or a parked message
	// (stored events waiting stay in their streams: see
	// [Explanation.Pending]). All three are
	// as this runner knows its segments' instances: from its steps, its
	// outbox, and the scan of the saga's records when Run, CatchUp or
	// LoadDeadlines starts, so a new process counts what an earlier one
	// left.
	ParkedInstances int
	OldestParked    time.Time
	HeldMessages    int
	// Conflicts counts the steps whose append lost to another runner of the
	// same instance and were decided again from the reloaded instance: how
	// often several processes raced on one instance.
	Conflicts int64
	// Unreadable counts the step records the runner passed over because
	// they cannot be read (damaged, or foreign events of another type in an
	// instance stream), each logged with its stream and version; the
	// messages their instances could not take wait as dead letters.
	Unreadable int64
	// ForgottenTypes are the stored event types that the saga read before
	// and that this code does not read at all, sorted: types renamed
	// without their upcast.Rename step, whose events no longer reach the
	// saga, which Run and CatchUp refuse to start on (see [Runner.Run]).
	ForgottenTypes []string
	// DeadlinesPending counts the pending deadlines the runner knows of,
	// and NextDeadline is when the soonest it fires is due (zero for none).
	DeadlinesPending int
	NextDeadline     time.Time
	// Gaps counts the open gaps (see [Runner.Gaps]) and OldestGap is when
	// the oldest of them opened (zero for none).
	Gaps      int
	OldestGap time.Time
	// Segments is how many segments the instances hash to (see
	// [RunnerOptions.Segments]); HeldSegments, while Run runs, those whose
	// consumers run in this process, ascending: every segment, unless a
	// lease store shares several among processes.
	Segments     int
	HeldSegments []int
	// Events and Outbox are the two consumers (checkpoint, lag, rate,
	// lease) of a runner of one segment, once Run or CatchUp has started
	// them. A runner of several has two per segment: PerSegment holds
	// those of the segments held.
	Events, Outbox projection.Stats
	PerSegment     []SegmentStats
}

// SegmentStats are the figures of one segment's consumers.
type SegmentStats struct {
	Segment        int
	Events, Outbox projection.Stats
}

// Stats returns the saga type's figures.
func (r *Runner[S]) Stats(ctx context.Context) (Stats, error) {
	c := r.e.stats
	s := Stats{Saga: r.e.t.name, Handled: c.handled.Load(), Duplicates: c.duplicates.Load(), Ignored: c.ignored.Load(),
		Held: c.held.Load(), Parked: c.parked.Load(), Conflicts: c.conflicts.Load(), Unreadable: c.unreadable.Load(),
		Segments: r.segments, ForgottenTypes: r.forgotten.list()}
	s.DeadlinesPending, s.NextDeadline = r.timers.count()
	if gaps := r.stuck.gaps(); len(gaps) > 0 {
		s.Gaps, s.OldestGap = len(gaps), gaps[0].Since
	}
	if parked := r.stuck.parked(); len(parked) > 0 {
		s.ParkedInstances, s.OldestParked = len(parked), parked[0].Message.Since
	}
	s.HeldMessages = r.stuck.heldCount()
	if held := r.held.Load(); held != nil {
		s.HeldSegments = slices.Clone(*held)
	}
	cs := r.consumers.Load()
	if cs == nil {
		return s, nil
	}
	if r.segments == 1 {
		var err error
		if s.Events, err = cs.segs[0].events.Stats(ctx); err != nil {
			return s, err
		}
		s.Outbox, err = cs.segs[0].outbox.Stats(ctx)
		return s, err
	}
	for _, k := range s.HeldSegments {
		seg := SegmentStats{Segment: k}
		var err error
		if seg.Events, err = cs.segs[k].events.Stats(ctx); err != nil {
			return s, err
		}
		if seg.Outbox, err = cs.segs[k].outbox.Stats(ctx); err != nil {
			return s, err
		}
		s.PerSegment = append(s.PerSegment, seg)
	}
	return s, nil
}
