package soak_test

import (
	"context"
	"sync"
	"time"

	"github.com/cairn-es/cairn/eventstore/sqlite"
)

// The parent's samples: the runner's lag, read from the store whatever
// runner is alive (a dead one's lag grows), and the placing process's own
// heap and goroutines.

// lagSample is the store's head and the runner's two checkpoints at one
// moment. Positions on SQLite are dense integers, so head minus checkpoint
// is the events appended since the checkpoint: an upper bound of the
// consumer's backlog, since it counts the events its filter passes over
// too (the saga's own records for the events consumer, aggregate events
// for the outbox).
type lagSample struct {
	At                   time.Duration
	Head, Events, Outbox uint64
	Err                  string
}

// EventsLag and OutboxLag are the two consumers' lag in events.
func (s lagSample) EventsLag() float64 { return float64(s.Head - min(s.Events, s.Head)) }
func (s lagSample) OutboxLag() float64 { return float64(s.Head - min(s.Outbox, s.Head)) }

// placerSample is the placing process's own metrics at one moment.
type placerSample struct {
	At time.Duration
	procMetrics
}

type sampler struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	lags   []lagSample
	placer []placerSample
}

// startSampler samples every period until stop.
func startSampler(ctx context.Context, s *sqlite.Store, events, outbox string, every time.Duration, began time.Time) *sampler {
	ctx, cancel := context.WithCancel(ctx)
	smp := &sampler{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(smp.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			l := lagSample{At: time.Since(began)}
			head, err := s.Head(ctx)
			if err == nil {
				l.Head = head.Major
				// The checkpoints are read after the head, so that a
				// checkpoint is never counted ahead of the head it is
				// compared with.
				var ev, ob uint64
				if cp, e := s.Checkpoint(ctx, events); e == nil {
					ev = cp.Position.Major
				} else {
					err = e
				}
				if cp, e := s.Checkpoint(ctx, outbox); e == nil {
					ob = cp.Position.Major
				} else {
					err = e
				}
				l.Events, l.Outbox = ev, ob
			}
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				l.Err = err.Error()
			}
			p := placerSample{At: l.At, procMetrics: readProcMetrics()}
			smp.mu.Lock()
			smp.lags = append(smp.lags, l)
			smp.placer = append(smp.placer, p)
			smp.mu.Unlock()
		}
	}()
	return smp
}

func (smp *sampler) stop() {
	smp.cancel()
	<-smp.done
}

func (smp *sampler) results() ([]lagSample, []placerSample) {
	smp.mu.Lock()
	defer smp.mu.Unlock()
	return append([]lagSample(nil), smp.lags...), append([]placerSample(nil), smp.placer...)
}
