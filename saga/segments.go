package saga

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/projection"
)

// MaxSegments is the most segments a saga type's instances hash to (see
// [RunnerOptions.Segments]). Each segment a process runs is two consumers
// that read the saga's whole log, so more segments than processes buys
// only reading.
const MaxSegments = 256

// Segment returns the segment of instance id when a saga type's instances
// hash to n segments: FNV-1a (64 bits) of the ID's bytes, modulo n; 0 when
// n is 1 or less.
//
// The function is part of the storage contract, as checkpoints are kept
// per segment: a segment's consumers step only the instances that hash to
// it, and pass over the others. Changing n (or this function) moves
// instances between segments, whose checkpoints then stand at different
// places in the log, so that a message of a moved instance may be stepped
// twice or read late. That is safe only because correctness never depends
// on which process owns an instance: a second step of a message is a
// duplicate by the instance's watermarks, and a step that races another
// loses its append and reloads.
func Segment(id string, n int) int {
	if n <= 1 {
		return 0
	}
	const (
		offset64 = 14695981039346656037
		prime64  = 1099511628211
	)
	h := uint64(offset64)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= prime64
	}
	return int(h % uint64(n))
}

// segment is one segment's two consumers: of the events the saga maps,
// and of its step records (the outbox).
type segment struct {
	events, outbox *projection.Consumer
	// external says the events come from the caller: the events consumer
	// is not run (see RunnerOptions.ExternalEvents).
	external bool
}

// consumers are the segments of a running saga type, by index.
type consumers struct {
	segs []*segment
}

// segmentNames returns the names of the consumers of segment k: the
// names of earlier versions for an unsegmented runner, so that its
// checkpoints keep working; "saga:<type>#k/n" and "saga:<type>#k/n:outbox"
// otherwise.
func (r *Runner[S]) segmentNames(k int) (events, outbox string) {
	if r.segments == 1 {
		return r.unroutedName(), r.unroutedName() + ":outbox"
	}
	events = fmt.Sprintf("%s%s#%d/%d", StreamPrefix, r.e.t.name, k, r.segments)
	return events, events + ":outbox"
}

// unroutedName is "saga:<type>": the consumer under which the dead letters
// of stored events that reach no instance are kept, whatever the
// segments, and the events consumer of an unsegmented runner.
func (r *Runner[S]) unroutedName() string { return StreamPrefix + r.e.t.name }

// Consumers returns the names of segment k's two consumers, under which
// their checkpoints and leases are stored and their [projection.Stats]
// name them: the events consumer, which steps the events the saga maps,
// and the outbox, which sends the commands of the saga's step records. A
// runner of one segment has segment 0 only, whose consumers are
// "saga:<type>" and "saga:<type>:outbox"; one of n segments names segment
// k's "saga:<type>#k/n" and "saga:<type>#k/n:outbox". A k outside [0, n)
// is an [*eventstore.InvalidArgumentError]. The dead letters of stored
// events that reach no instance are kept under "saga:<type>" whatever the
// segments; [Runner.DeadLetters] yields them with the others.
func (r *Runner[S]) Consumers(k int) (events, outbox string, err error) {
	if k < 0 || k >= r.segments {
		return "", "", &eventstore.InvalidArgumentError{Index: -1, Field: "segment",
			Reason: fmt.Sprintf("is %d, outside [0, %d) for saga %q", k, r.segments, r.e.t.name)}
	}
	events, outbox = r.segmentNames(k)
	return events, outbox, nil
}

// setActive makes segment k's instances indexed (deadlines to fire, gaps
// to report) in this runner, or not. A segment that stops being active
// here forgets its instances: another process runs them, and these
// indexes would not see them change.
func (r *Runner[S]) setActive(k int, on bool) {
	r.activity.Lock()
	defer r.activity.Unlock()
	r.timers.setActive(k, on)
	if on {
		return
	}
	r.stuck.forget(func(id string) bool { return Segment(id, r.segments) == k })
}

// running is a segment whose consumers run in this process.
type running struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// segmentRuns starts and stops the segments' consumers as the runner's
// share changes. One goroutine (Run's, or the membership loop's) calls it.
type segmentRuns struct {
	ctx  context.Context
	fail context.CancelCauseFunc // ends Run with a consumer's error
	segs []*segment
	on   map[int]*running
	// set is told of each segment started and stopped, and report of the
	// segments held after each change.
	set    func(k int, on bool)
	report func(held []int)
}

// assign runs the segments that want marks and stops the others. A
// segment stops before assign returns: its consumers have released their
// leases, so that the process that takes it over need not wait for them
// to lapse.
func (s *segmentRuns) assign(want []bool) {
	for k, seg := range s.segs {
		run, on := s.on[k]
		switch {
		case want[k] && !on:
			s.set(k, true)
			ctx, cancel := context.WithCancel(s.ctx)
			run = &running{cancel: cancel, done: make(chan struct{})}
			s.on[k] = run
			go func() {
				defer close(run.done)
				var wg sync.WaitGroup
				for _, c := range seg.running() {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if err := c.Run(ctx); err != nil {
							s.fail(err)
						}
					}()
				}
				wg.Wait()
			}()
		case !want[k] && on:
			s.set(k, false)
			run.cancel()
			<-run.done
			delete(s.on, k)
		}
	}
	s.report(s.held())
}

// held returns the segments running, ascending.
func (s *segmentRuns) held() []int {
	out := make([]int, 0, len(s.on))
	for k := range s.on {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// wait waits for every running segment to end (the ctx they run under has
// ended).
func (s *segmentRuns) wait() {
	for _, run := range s.on {
		<-run.done
	}
}

// all returns a share of every one of n segments.
func all(n int) []bool {
	want := make([]bool, n)
	for k := range want {
		want[k] = true
	}
	return want
}

// shareOf returns the segments, of n, that the member of rank rank among
// members runs: those whose index modulo members is its rank.
func shareOf(n, rank, members int) []bool {
	want := make([]bool, n)
	for k := rank; members > 0 && k < n; k += members {
		want[k] = true
	}
	return want
}

// running returns the consumers of the segment that Run runs: its outbox,
// and its events consumer unless the events come from the caller (see
// RunnerOptions.ExternalEvents).
func (s *segment) running() []*projection.Consumer {
	if s.external {
		return []*projection.Consumer{s.outbox}
	}
	return []*projection.Consumer{s.events, s.outbox}
}
