package projection_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/internal/testrig/counters"
	"github.com/cairn-es/cairn/projection"
	"github.com/cairn-es/cairn/projection/projectiontest"
)

// memoryHarness runs the suite on the in-memory stores. The crash and
// two-process tests need stores that outlive a process, so they skip here.
func memoryHarness() projectiontest.Harness[*memory.Tx] {
	return projectiontest.Harness[*memory.Tx]{
		New: func(t testing.TB) projectiontest.Stores[*memory.Tx] {
			events := memory.New()
			t.Cleanup(func() { _ = events.Close() })
			return projectiontest.Stores[*memory.Tx]{Events: events, Consumers: memory.New()}
		},
		Add: counters.AddMemory,
		Get: func(t testing.TB, s projectiontest.Stores[*memory.Tx], key string) int64 {
			return counters.Memory(t, s.Consumers.(*memory.Store), key)
		},
	}
}

func TestProjections(t *testing.T) {
	projectiontest.Run(t, memoryHarness())
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestNewRejectsBadSetUp(t *testing.T) {
	events := memory.New()
	t.Cleanup(func() { _ = events.Close() })
	reg := projectiontest.Registry(t)
	noop := func(context.Context, codec.Decoded) error { return nil }
	_, err := projection.New("", events, reg, memory.New(), noop, projection.Options{})
	assert.ErrorIs(t, err, eventstore.ErrInvalidArgument)
	_, err = projection.New("p", events, reg, memory.New(), nil, projection.Options{})
	assert.ErrorIs(t, err, eventstore.ErrInvalidArgument)
	_, err = projection.New("p", nil, reg, memory.New(), noop, projection.Options{})
	assert.ErrorIs(t, err, eventstore.ErrInvalidArgument)
	_, err = projection.NewTx[*memory.Tx]("p", events, reg, memory.New(), nil, projection.Options{})
	assert.ErrorIs(t, err, eventstore.ErrInvalidArgument)
}

// Run returns nil however and whenever its context ends, as the saga
// runner's does: before it took its lease, past a deadline, or with a
// cause of the caller's.
func TestRunReturnsNilWhenItsContextEnds(t *testing.T) {
	events := memory.New()
	t.Cleanup(func() { _ = events.Close() })
	reg := projectiontest.Registry(t)
	c, err := projection.New("p", events, reg, memory.New(), func(context.Context, codec.Decoded) error { return nil },
		projection.Options{Exclusive: true, Logger: discard()})
	require.NoError(t, err)

	ended, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, c.Run(ended), "a context that ended before Run started")
	timed, stop := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer stop()
	require.NoError(t, c.Run(timed), "a context whose deadline passed while Run ran")
	caused, cancelCause := context.WithCancelCause(context.Background())
	cancelCause(errors.New("the process is shutting down"))
	require.NoError(t, c.Run(caused), "a context cancelled with a cause of its caller's")
}

// TestRunLogsStats checks that a running consumer reports its figures as
// slog records.
func TestRunLogsStats(t *testing.T) {
	events := memory.New()
	t.Cleanup(func() { _ = events.Close() })
	var buf syncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	c, err := projection.New("logged", events, projectiontest.Registry(t), memory.New(),
		func(context.Context, codec.Decoded) error { return nil },
		projection.Options{StatsInterval: 10 * time.Millisecond, Logger: logger})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	require.Eventually(t, func() bool { return strings.Contains(buf.String(), "projection: stats") }, 20*time.Second, 5*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	out := buf.String()
	for _, attr := range []string{"consumer=logged", "stats.checkpoint=0:0", "stats.parked=0", "stats.rate=", "stats.time_lag="} {
		assert.Contains(t, out, attr)
	}
}

// TestNoStatsLogKeepsRunQuiet: NoStatsLog turns the periodic stats
// records off, whatever StatsInterval says.
func TestNoStatsLogKeepsRunQuiet(t *testing.T) {
	events := memory.New()
	t.Cleanup(func() { _ = events.Close() })
	var buf syncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	c, err := projection.New("quiet", events, projectiontest.Registry(t), memory.New(),
		func(context.Context, codec.Decoded) error { return nil },
		projection.Options{StatsInterval: time.Millisecond, NoStatsLog: true, Logger: logger})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	time.Sleep(100 * time.Millisecond) // a hundred intervals
	cancel()
	require.NoError(t, <-done)
	assert.NotContains(t, buf.String(), "projection: stats")
}

type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
