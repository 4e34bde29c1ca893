package projection_test

import (
	"context"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/check"
	"github.com/cairn-es/cairn/projection"
	"github.com/cairn-es/cairn/projection/projectiontest"
)

// TestNewRefusesBadOptions: options that would crash the process (a huge
// batch allocates its buffers up front), or fail only once the consumer
// runs, are refused by New and NewTx, naming the option.
func TestNewRefusesBadOptions(t *testing.T) {
	events := memory.New()
	t.Cleanup(func() { _ = events.Close() })
	reg := projectiontest.Registry(t)
	noop := func(context.Context, codec.Decoded) error { return nil }
	noopTx := func(context.Context, *memory.Tx, codec.Decoded) error { return nil }
	leases := memory.New()
	for _, c := range []struct {
		what  string
		opts  projection.Options
		field string
	}{
		{"largest batch size", projection.Options{BatchSize: math.MaxInt}, "batch size"},
		{"batch size of 2^34", projection.Options{BatchSize: 1 << 34}, "batch size"},
		{"batch size one above the limit", projection.Options{BatchSize: projection.MaxBatchSize + 1}, "batch size"},
		{"empty filter type", projection.Options{Filter: eventstore.Filter{Types: []string{""}}}, "filter type"},
		{"system stream prefix", projection.Options{Filter: eventstore.Filter{StreamPrefixes: []string{"$x"}}}, "filter stream prefix"},
		{"lease TTL below a millisecond", projection.Options{Leases: leases, LeaseTTL: 500 * time.Microsecond}, "lease TTL"},
		{"lease TTL of 250 years", projection.Options{Leases: leases, LeaseTTL: 250 * 365 * 24 * time.Hour}, "lease TTL"},
		{"NUL byte in holder", projection.Options{Leases: leases, Holder: "h\x00"}, "lease holder"},
		{"invalid UTF-8 holder", projection.Options{Leases: leases, Holder: "h\xff"}, "lease holder"},
		{"holder leaving no room for a session ID", projection.Options{Leases: leases, Holder: strings.Repeat("h", projection.MaxHolderLen+1)}, "lease holder"},
	} {
		_, err := projection.New("p", events, reg, memory.New(), noop, c.opts)
		assert.Equal(t, "p", check.Invalid(t, err, c.field, "New: "+c.what).Consumer)
		_, err = projection.NewTx("p", events, reg, memory.New(), noopTx, c.opts)
		assert.Equal(t, "p", check.Invalid(t, err, c.field, "NewTx: "+c.what).Consumer)
	}
	_, err := projection.New("p", events, reg, memory.New(), noop, projection.Options{BatchSize: projection.MaxBatchSize})
	require.NoError(t, err, "the largest batch size is allowed")
	_, err = projection.New("p", events, reg, memory.New(), noop, projection.Options{Leases: leases, Holder: strings.Repeat("h", projection.MaxHolderLen)})
	require.NoError(t, err, "the longest holder is allowed")
}

// refusingLeases is a lease store that refuses every request as invalid,
// as a store does with a request its contract does not allow.
type refusingLeases struct {
	storekit.LeaseStore
	calls atomic.Int64
}

func (l *refusingLeases) AcquireLease(context.Context, string, string, time.Duration) (storekit.Lease, bool, error) {
	l.calls.Add(1)
	return storekit.Lease{}, false, &eventstore.InvalidArgumentError{Consumer: "p", Index: -1, Field: "lease holder", Reason: "is refused"}
}

// TestAcquireReturnsInvalidArgument: a lease request the store refuses as
// invalid is returned at once, not retried until the context ends.
func TestAcquireReturnsInvalidArgument(t *testing.T) {
	events := memory.New()
	t.Cleanup(func() { _ = events.Close() })
	leases := &refusingLeases{}
	c, err := projection.New("p", events, projectiontest.Registry(t), memory.New(),
		func(context.Context, codec.Decoded) error { return nil },
		projection.Options{Leases: leases, LeaseTTL: 5 * time.Millisecond, Logger: discard()})
	require.NoError(t, err)
	// The bound only ends the test on a consumer that retries forever.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = c.CatchUp(ctx)
	require.ErrorIs(t, err, eventstore.ErrInvalidArgument)
	assert.NotErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, int64(1), leases.calls.Load(), "the refused request was retried")
}

// TestExclusiveKeepsTheLeaseInTheCheckpointStore: Options.Exclusive with no
// lease store of its own takes the consumer's lease in the checkpoint
// store, so it waits while another process holds it there; a checkpoint
// store that keeps no leases is refused by New, naming what is missing.
func TestExclusiveKeepsTheLeaseInTheCheckpointStore(t *testing.T) {
	events := memory.New()
	t.Cleanup(func() { _ = events.Close() })
	reg := projectiontest.Registry(t)
	noop := func(context.Context, codec.Decoded) error { return nil }
	consumers := memory.New()
	_, held, err := consumers.AcquireLease(context.Background(), "p", "another process", time.Minute)
	require.NoError(t, err)
	require.True(t, held)

	shared, err := projection.New("p", events, reg, consumers, noop, projection.Options{Logger: discard()})
	require.NoError(t, err)
	require.NoError(t, shared.CatchUp(context.Background()), "without Exclusive, the lease is not asked for")

	exclusive, err := projection.New("p", events, reg, consumers, noop, projection.Options{Exclusive: true, Logger: discard()})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, exclusive.CatchUp(ctx), context.DeadlineExceeded, "an exclusive consumer waits for the lease another process holds")

	// A checkpoint store that keeps no leases.
	_, err = projection.New("p", events, reg, struct{ storekit.CheckpointStore }{consumers}, noop, projection.Options{Exclusive: true})
	assert.Equal(t, "p", check.Invalid(t, err, "lease store", "Exclusive without a lease store").Consumer)
}

// TestProcessHolder: the process's name in a session's lease holder is
// what precedes its last "/" and session ID; anything else is a holder of
// its own.
func TestProcessHolder(t *testing.T) {
	id := "01JNQ0000000000000000000A1"
	for holder, want := range map[string]string{
		"host-1/" + id:       "host-1",
		"eu/host-1/" + id:    "eu/host-1",
		id:                   id,
		"host-1/not-a-ulid":  "host-1/not-a-ulid",
		"host-1":             "host-1",
		"/" + id:             "",
		"host-1/" + id + "/": "host-1/" + id + "/",
	} {
		assert.Equal(t, want, projection.ProcessHolder(holder), holder)
	}
}
