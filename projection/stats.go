package projection

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/backoff"
)

// HeadReader is implemented by stores that can tell the position of their
// newest event cheaply. [Consumer.Stats] uses it for [Stats.Head]; other
// stores report the newest event the consumer has read instead.
type HeadReader interface {
	Head(ctx context.Context) (eventstore.Position, error)
}

// Stats is how a consumer is doing, for dashboards and alerts.
//
// Positions are pairs that cannot be subtracted (PostgreSQL's and
// KurrentDB's are not dense), so lag is given three ways: the head and
// checkpoint positions, the number of events read but not yet checkpointed
// (exact while catching up a batch, a lower bound of the backlog), and a
// time lag that needs no store support.
type Stats struct {
	Consumer string
	// Checkpoint is the stored position the consumer has applied through.
	Checkpoint eventstore.Position
	// Head is the store's newest position when the store is a
	// [HeadReader]; otherwise the newest position the consumer has read.
	Head eventstore.Position
	// Pending counts events read from the store but not yet checkpointed.
	Pending int
	// TimeLag is how much older the last checkpointed event is than the
	// newest event read: zero when the consumer is caught up.
	TimeLag time.Duration
	// Handled counts the stored events checkpointed since the consumer
	// was built.
	Handled uint64
	// Rate is stored events checkpointed per second over the last few
	// seconds.
	Rate float64
	// Parked counts the consumer's dead letters.
	Parked int
	// Leader reports that this consumer holds its lease (always false
	// without a lease store).
	Leader bool
}

// LogValue makes Stats print as a group of attributes in slog records.
func (s Stats) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("checkpoint", s.Checkpoint.String()),
		slog.String("head", s.Head.String()),
		slog.Int("pending", s.Pending),
		slog.Duration("time_lag", s.TimeLag),
		slog.Uint64("handled", s.Handled),
		slog.Float64("rate", s.Rate),
		slog.Int("parked", s.Parked),
		slog.Bool("leader", s.Leader),
	)
}

// rateWindow is the span over which Rate is measured.
const rateWindow = 2 * time.Second

type recorder struct {
	mu           sync.Mutex
	checkpoint   eventstore.Position
	head         eventstore.Position
	headAt       time.Time // RecordedAt of the newest event read
	doneAt       time.Time // RecordedAt of the last checkpointed event
	read, done   int       // since the current consumption began
	handled      uint64
	windowStart  time.Time
	windowEvents int
	rate         float64
	leader       bool
	// moved wakes WaitFor when this process moves the checkpoint.
	moved storekit.Notifier
}

func (r *recorder) resetPending() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.read, r.done = 0, 0
}

func (r *recorder) sawEvent(e eventstore.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.read++
	if r.head.Before(e.Position) {
		r.head = e.Position
		r.headAt = e.RecordedAt
	}
}

func (r *recorder) setCheckpoint(p eventstore.Position) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checkpoint = p
	if r.head.Before(p) {
		r.head = p
	}
	r.moved.Notify()
}

func (r *recorder) setLease(held bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leader = held
}

func (r *recorder) checkpointed(_, to eventstore.Position, n int, recordedAt time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checkpoint = to
	r.moved.Notify()
	r.doneAt = recordedAt
	r.done += n
	r.handled += uint64(n)
	now := time.Now()
	if r.windowStart.IsZero() {
		r.windowStart = now
	}
	r.windowEvents += n
	if el := now.Sub(r.windowStart); el >= rateWindow {
		r.rate = float64(r.windowEvents) / el.Seconds()
		r.windowStart, r.windowEvents = now, 0
	}
}

func (r *recorder) snapshot() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Stats{Checkpoint: r.checkpoint, Head: r.head, Pending: max(r.read-r.done, 0), Handled: r.handled, Rate: r.rate, Leader: r.leader}
	if r.checkpoint.Before(r.head) && !r.doneAt.IsZero() {
		s.TimeLag = max(r.headAt.Sub(r.doneAt), 0)
	}
	// A window with no recent batch decays the rate instead of keeping the
	// last busy figure forever.
	if el := time.Since(r.windowStart); !r.windowStart.IsZero() && el >= rateWindow {
		s.Rate = float64(r.windowEvents) / el.Seconds()
	}
	return s
}

// Stats returns the consumer's current figures. Parked and (for a
// [HeadReader] store) Head are read from the stores.
func (c *Consumer) Stats(ctx context.Context) (Stats, error) {
	s := c.stats.snapshot()
	s.Consumer = c.name
	if h, ok := c.events.(HeadReader); ok {
		head, err := h.Head(ctx)
		if err != nil {
			return s, err
		}
		s.Head = head
	}
	if c.opts.DeadLetters != nil {
		n, err := c.opts.DeadLetters.CountDeadLetters(ctx, c.name)
		if err != nil {
			return s, err
		}
		s.Parked = n
	}
	return s, nil
}

// logStats logs the consumer's Stats at info level every interval until
// ctx ends.
func (c *Consumer) logStats(ctx context.Context) {
	if c.opts.NoStatsLog {
		return
	}
	every := c.opts.StatsInterval
	if every <= 0 {
		every = 30 * time.Second
	}
	for backoff.Wait(ctx, every) == nil {
		s, err := c.Stats(ctx)
		if err != nil {
			c.log.WarnContext(ctx, "projection: reading stats", slog.Any("error", err))
			continue
		}
		c.log.InfoContext(ctx, "projection: stats", slog.Any("stats", s))
	}
}
