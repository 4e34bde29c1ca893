package saga_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/examples/reservation/domain"
	"github.com/cairn-es/cairn/internal/check"
	"github.com/cairn-es/cairn/internal/testrig/reservation"
	"github.com/cairn-es/cairn/saga"
)

// TestSegmentHashIsStable guards the storage contract: checkpoints are
// kept per segment, so the segment of an instance ID must never change
// between releases. The values were computed apart from this code (FNV-1a
// 64 by hand) and checked against hash/fnv.
func TestSegmentHashIsStable(t *testing.T) {
	for _, c := range []struct {
		id           string
		of4, of16, x int // segments of 4, 16 and 256
	}{
		{"", 1, 5, 37},
		{"o000", 2, 10, 26},
		{"order-42", 0, 4, 212},
		{"a", 0, 12, 140},
		{"Zürich", 0, 0, 192},
		{"c-199", 2, 10, 74},
	} {
		assert.Equal(t, c.of4, saga.Segment(c.id, 4), "%q of 4", c.id)
		assert.Equal(t, c.of16, saga.Segment(c.id, 16), "%q of 16", c.id)
		assert.Equal(t, c.x, saga.Segment(c.id, 256), "%q of 256", c.id)
		h := fnv.New64a()
		_, _ = h.Write([]byte(c.id))
		assert.Equal(t, int(h.Sum64()%256), saga.Segment(c.id, 256), "%q is FNV-1a 64", c.id)
	}
	for _, n := range []int{-3, 0, 1} {
		assert.Zero(t, saga.Segment("anything", n), "one segment (n = %d)", n)
	}
}

// TestSegmentHashSpreadsInstances: IDs as services make them (a prefix and
// a counter) spread evenly, so that each process's share of the segments
// is its share of the work.
func TestSegmentHashSpreadsInstances(t *testing.T) {
	const ids = 20000
	for _, n := range []int{2, 4, 16} {
		counts := make([]int, n)
		for i := range ids {
			counts[saga.Segment(fmt.Sprintf("order-%d", i), n)]++
		}
		even := ids / n
		for k, c := range counts {
			assert.InDelta(t, even, c, float64(even)/10, "segment %d of %d holds %d of %d IDs", k, n, c, ids)
		}
	}
}

func saleRunner(t *testing.T, opts saga.RunnerOptions) (*saga.Runner[reservation.Sale], error) {
	t.Helper()
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, reservation.Register(reg))
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	bus := command.New(store, reg, command.Options{})
	require.NoError(t, reservation.Route(bus))
	sale, err := reservation.NewSale(reg)
	require.NoError(t, err)
	if opts.Checkpoints == nil {
		opts.Checkpoints = memory.New()
	}
	return saga.NewRunner(sale, store, bus, opts)
}

// TestSegmentConsumerNames: one segment keeps the consumer names of a
// runner made before segments existed, so that its checkpoints go on;
// several name each segment's pair; a segment out of range is a typed
// error, and so is a segment count out of range at NewRunner.
func TestSegmentConsumerNames(t *testing.T) {
	one, err := saleRunner(t, saga.RunnerOptions{})
	require.NoError(t, err)
	events, outbox, err := one.Consumers(0)
	require.NoError(t, err)
	assert.Equal(t, []string{"saga:sale", "saga:sale:outbox"}, []string{events, outbox})

	four, err := saleRunner(t, saga.RunnerOptions{Segments: 4})
	require.NoError(t, err)
	events, outbox, err = four.Consumers(3)
	require.NoError(t, err)
	assert.Equal(t, []string{"saga:sale#3/4", "saga:sale#3/4:outbox"}, []string{events, outbox})
	for _, k := range []int{-1, 4} {
		_, _, err = four.Consumers(k)
		check.Invalid(t, err, "segment", fmt.Sprint("segment ", k))
	}
	for _, n := range []int{-1, saga.MaxSegments + 1} {
		_, err := saleRunner(t, saga.RunnerOptions{Segments: n})
		var setup *saga.SetupError
		require.ErrorAs(t, err, &setup, "segments %d", n)
		assert.Contains(t, setup.Reason, "Segments")
	}
	// Exclusive keeps the leases in the checkpoint store, which must keep
	// them.
	_, err = saleRunner(t, saga.RunnerOptions{Exclusive: true})
	require.NoError(t, err, "the memory store keeps leases")
	_, err = saleRunner(t, saga.RunnerOptions{Exclusive: true, Checkpoints: struct{ storekit.CheckpointStore }{memory.New()}})
	var setup *saga.SetupError
	require.ErrorAs(t, err, &setup)
	assert.Contains(t, setup.Reason, "Exclusive")
}

// TestEachSegmentStepsItsOwnInstances: with three segments and no lease,
// one runner's three pairs of consumers each read every event and record,
// step only their own instances, and move their checkpoints over the
// others': every message is handled once, and an event that reaches no
// instance is parked once, by segment 0, under the runner's events
// consumer.
func TestEachSegmentStepsItsOwnInstances(t *testing.T) {
	s, c := memory.New(), memory.New()
	t.Cleanup(func() { _ = s.Close() })
	f := newSale(t, twoRunnerStores{events: s, consumers: c})
	ctx := context.Background()
	st, err := reservation.NewSale(f.reg)
	require.NoError(t, err)
	bus := command.New(s, f.reg, command.Options{})
	require.NoError(t, reservation.Route(bus))
	r, err := saga.NewRunner(st, s, bus, saga.RunnerOptions{Segments: 3, Checkpoints: c, Clock: f.clock, Logger: f.logs.logger("one")})
	require.NoError(t, err)

	nobody, err := f.reg.Encode(domain.OrderPlaced{OrderID: ""})
	require.NoError(t, err)
	_, err = s.Append(ctx, "order-", eventstore.NoStream, nobody)
	require.NoError(t, err)
	f.place(t, 0, twoRunnerOrders)
	require.NoError(t, r.CatchUp(ctx))
	f.clock.Advance(reservation.PaymentWindow)
	require.NoError(t, r.CatchUp(ctx))
	steps := f.verify(t)

	stats, err := r.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, steps, stats.Handled, "each message handled once, by its instance's segment")
	assert.Zero(t, stats.Duplicates)
	assert.EqualValues(t, 1, stats.Parked, "the event that reaches no instance is parked once")
	n, err := c.CountDeadLetters(ctx, "saga:sale")
	require.NoError(t, err)
	assert.Equal(t, 1, n)

	// Every segment's pair read to the same end, over the others'
	// instances too.
	var ends [2][]eventstore.Position
	for k := range 3 {
		events, outbox, err := r.Consumers(k)
		require.NoError(t, err)
		for i, name := range []string{events, outbox} {
			cp, err := c.Checkpoint(ctx, name)
			require.NoError(t, err)
			assert.False(t, cp.Position.IsZero(), "%s moved", name)
			ends[i] = append(ends[i], cp.Position)
		}
	}
	for i := range ends {
		assert.Equal(t, ends[i][0], ends[i][1])
		assert.Equal(t, ends[i][0], ends[i][2])
	}
	for _, name := range []string{"saga:sale", "saga:sale:outbox"} {
		cp, err := c.Checkpoint(ctx, name)
		require.NoError(t, err)
		assert.True(t, cp.Position.IsZero(), "the unsegmented consumer %s is not used", name)
	}
}

// eventsConsumer and outboxConsumer name the consumers of a runner of one
// segment.
func eventsConsumer[S any](r *saga.Runner[S]) string {
	events, _, _ := r.Consumers(0)
	return events
}

func outboxConsumer[S any](r *saga.Runner[S]) string {
	_, outbox, _ := r.Consumers(0)
	return outbox
}
