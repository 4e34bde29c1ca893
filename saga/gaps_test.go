package saga_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/saga"
)

// warnings keeps the messages of the records logged at WARN or above.
type warnings struct {
	mu    sync.Mutex
	attrs []map[string]string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	m := map[string]string{"msg": r.Message}
	r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
	w.mu.Lock()
	defer w.mu.Unlock()
	w.attrs = append(w.attrs, m)
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

func (w *warnings) about(instance string) []map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []map[string]string
	for _, m := range w.attrs {
		if m["instance"] == instance {
			out = append(out, m)
		}
	}
	return out
}

func TestAGapIsListedWarnedAboutOnceAndReleased(t *testing.T) {
	f := newFixture(t)
	logs := &warnings{}
	r, err := saga.NewRunner(saleType(t, testRegistry(t)), f.store, nil, saga.RunnerOptions{
		Clock: f.clock, Logger: slog.New(logs), GapAlert: 5 * time.Minute, Checkpoints: memory.New()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	deliver := func(id, source string, seq uint64, text string) saga.Outcome {
		out, err := r.Deliver(ctx, saga.Delivery{Source: source, Sequence: seq, Event: Note{OrderID: id, Text: text}})
		require.NoError(t, err)
		return out
	}
	require.Equal(t, saga.Handled, deliver("1", "notes", 0, "a"))
	opened := f.clock.Now()
	require.Equal(t, saga.Held, deliver("1", "notes", 3, "d"))
	require.Equal(t, saga.Held, deliver("1", "notes", 2, "c"))
	require.Equal(t, saga.Handled, deliver("2", "notes", 0, "a"), "another instance, with no gap")

	want := saga.Gap{Instance: "1", Source: "notes", WaitsFor: 1, Held: 2, Since: opened}
	assert.Equal(t, []saga.Gap{want}, r.Gaps())
	stats, err := r.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, stats.Gaps)
	assert.Equal(t, opened, stats.OldestGap)

	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	require.Eventually(t, func() bool {
		f.clock.Advance(time.Minute)
		return len(logs.about("1")) > 0
	}, 10*time.Second, 5*time.Millisecond, "a gap older than GapAlert is warned about: %v", logs.attrs)
	for range 20 {
		f.clock.Advance(time.Minute)
		time.Sleep(time.Millisecond)
	}
	warned := logs.about("1")
	require.Len(t, warned, 1, "once per gap")
	assert.Equal(t, "notes", warned[0]["source"])
	assert.Equal(t, "1", warned[0]["waits_for"])
	assert.Empty(t, logs.about("2"))

	require.NoError(t, r.Release(ctx, "1", "notes", 1))
	assert.Empty(t, r.Gaps(), "released: the held messages ran")
	x, err := r.Explain(ctx, "1")
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "c", "d"}, x.State.Seen)
	cancel()
	require.NoError(t, <-done)
}

// TestNoGapAlertKeepsRunQuietAboutGaps: NoGapAlert turns the gap warnings
// off, whatever GapAlert says; the gap is still listed.
func TestNoGapAlertKeepsRunQuietAboutGaps(t *testing.T) {
	f := newFixture(t)
	logs := &warnings{}
	r, err := saga.NewRunner(saleType(t, testRegistry(t)), f.store, nil, saga.RunnerOptions{
		Clock: f.clock, Logger: slog.New(logs), GapAlert: time.Minute, NoGapAlert: true, Checkpoints: memory.New()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, seq := range []uint64{0, 2} {
		_, err := r.Deliver(ctx, saga.Delivery{Source: "notes", Sequence: seq, Event: Note{OrderID: "1", Text: "x"}})
		require.NoError(t, err)
	}
	require.Len(t, r.Gaps(), 1)

	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	for range 50 {
		f.clock.Advance(time.Minute)
		time.Sleep(2 * time.Millisecond)
	}
	cancel()
	require.NoError(t, <-done)
	assert.Empty(t, logs.about("1"), "no warning with NoGapAlert")
	assert.Len(t, r.Gaps(), 1, "the gap is still listed")
}

func TestAGapFillsByItself(t *testing.T) {
	f := newFixture(t)
	f.deliver(t, "notes", 0, Note{OrderID: "1", Text: "a"})
	f.deliver(t, "notes", 2, Note{OrderID: "1", Text: "c"})
	require.Len(t, f.runner.Gaps(), 1)
	f.deliver(t, "notes", 1, Note{OrderID: "1", Text: "b"})
	assert.Empty(t, f.runner.Gaps())
	stats, err := f.runner.Stats(context.Background())
	require.NoError(t, err)
	assert.Zero(t, stats.Gaps)
	assert.True(t, stats.OldestGap.IsZero())
}
