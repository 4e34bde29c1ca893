package saga_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/saga"
	"github.com/cairn-es/cairn/saga/sagatest"
)

// Idle is the state of the memory test's saga: how many messages its
// instance took.
type Idle struct{ N int }

// Touch is the memory test's message; its first one starts an instance.
type Touch struct{ ID string }

// Timeout is the payload of the memory test's deadlines.
type Timeout struct{}

// TestTenThousandInstancesReschedulingAHundredTimesKeepTheHeapFlat: the
// memory a runner keeps is bounded by its instances and their pending
// deadlines, not by how often those deadlines change (issue 20's measure,
// recorded in docs/benchmarks.md). 10,000 instances each hold a deadline
// due far ahead ("expiry") and an inactivity timeout ("idle") that every
// message reschedules; each instance takes 100 messages. The live heap
// after the first message of each (every instance and deadline in place)
// and after the hundredth must be the same, within the noise of the
// garbage collector. The store keeps only each stream's latest event, so
// that what grows would be the runner's. That size (a million steps) runs
// in `make torture` (CAIRN_TORTURE=1); `make test` runs 2,000 instances of
// 50 messages, or 1,000 of 20 under the race detector.
func TestTenThousandInstancesReschedulingAHundredTimesKeepTheHeapFlat(t *testing.T) {
	instances, messages := 2_000, 50
	switch {
	case os.Getenv("CAIRN_TORTURE") == "1":
		instances, messages = 10_000, 100
	case raceEnabled:
		instances, messages = 1_000, 20
	}
	ctx := context.Background()
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[Idle](reg, "idle.state", 1))
	require.NoError(t, codec.Register[Touch](reg, "touch", 1))
	require.NoError(t, codec.Register[Timeout](reg, "timeout", 1))
	typ, err := saga.New[Idle]("idle", reg, saga.Options[Idle]{})
	require.NoError(t, err)
	require.NoError(t, saga.On(typ, saga.Event[Idle, Touch]{Starts: true,
		Instance: func(e Touch, _ eventstore.Metadata) string { return e.ID },
		Handle: func(_ context.Context, s *Idle, _ Touch, out *saga.Output) error {
			if s.N == 0 {
				out.ScheduleAfter("expiry", 30*24*time.Hour, Timeout{})
			}
			s.N++
			out.ScheduleAfter("idle", time.Hour, Timeout{})
			return nil
		}}))
	for _, name := range []string{"expiry", "idle"} {
		require.NoError(t, saga.OnDeadline(typ, name, func(context.Context, *Idle, Timeout, *saga.Output) error { return nil }))
	}
	clock := sagatest.NewClock(sagatest.Start)
	store := &edgeLatestStore{latest: map[string]eventstore.Event{}}
	baseline := edgeLiveHeap()
	r, err := saga.NewRunner(typ, store, nil, saga.RunnerOptions{Clock: clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	round := func(seq uint64) {
		for i := range instances {
			out, err := r.Deliver(ctx, saga.Delivery{Source: "touches", Sequence: seq, Event: Touch{ID: "i" + strconv.Itoa(i)}})
			if err != nil || out != saga.Handled {
				require.NoError(t, err)
				require.Equal(t, saga.Handled, out)
			}
		}
		clock.Advance(time.Second)
	}
	round(0)
	first := edgeLiveHeap()
	began := time.Now()
	for seq := 1; seq < messages; seq++ {
		round(uint64(seq))
	}
	took := time.Since(began)
	last := edgeLiveHeap()
	runtime.KeepAlive(r)
	runtime.KeepAlive(store)

	st, err := r.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2*instances, st.DeadlinesPending)
	perInstance := float64(int64(first)-int64(baseline)) / float64(instances)
	growth := int64(last) - int64(first)
	t.Logf("%d instances, %d messages each: live heap %d bytes before the runner, %d after the first message of each "+
		"(%.0f bytes per instance with its two deadlines and its latest record in the test's store), %d after the last: %+d bytes "+
		"(%+.2f bytes per rescheduling); %d steps in %s (%.1f µs each, memory store of latest records)",
		instances, messages, baseline, first, perInstance, last, growth, float64(growth)/float64(instances*(messages-1)),
		instances*(messages-1), took.Round(time.Millisecond), float64(took.Microseconds())/float64(instances*(messages-1)))
	assert.Less(t, growth, int64(first-baseline)/20+1<<20,
		"the heap grew by %d bytes over %d reschedulings, more than 5%% of what the instances took (plus 1 MiB of noise)", growth, instances*(messages-1))
}
