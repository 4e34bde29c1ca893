package linearize

import (
	"context"
	"iter"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
)

// The checker must catch stores that break linearizability in ways a real
// store could: these wrap the memory store with one such bug each, and the
// quick history must be judged not linearizable, with a visualization.

// laggingReads serves half of its reads as a replica one event behind
// would: without the stream's newest event.
type laggingReads struct{ eventstore.Store }

func (s laggingReads) ReadStream(ctx context.Context, stream string, opts eventstore.ReadOptions) iter.Seq2[eventstore.Event, error] {
	return func(yield func(eventstore.Event, error) bool) {
		var (
			head   uint64
			exists bool
		)
		for e, err := range s.Store.ReadStream(ctx, stream, eventstore.ReadOptions{From: eventstore.End, Backward: true, Limit: 1}) {
			if err != nil {
				yield(e, err)
				return
			}
			head, exists = e.Version, true
		}
		lag := exists && rand.IntN(2) == 0
		for e, err := range s.Store.ReadStream(ctx, stream, opts) {
			if err == nil && lag && e.Version >= head {
				continue
			}
			if !yield(e, err) {
				return
			}
		}
	}
}

// checkThenAppend compares the expected version with the stream's head,
// then appends with Any: two appends that both pass the check both write,
// the lost update an optimistic lock exists to prevent.
type checkThenAppend struct{ eventstore.Store }

func (s checkThenAppend) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	if expected.IsAny() {
		return s.Store.Append(ctx, stream, expected, events...)
	}
	var (
		head   uint64
		exists bool
	)
	for e, err := range s.Store.ReadStream(ctx, stream, eventstore.ReadOptions{From: eventstore.End, Backward: true, Limit: 1}) {
		if err != nil {
			return eventstore.AppendResult{}, err
		}
		head, exists = e.Version, true
	}
	if !expected.Matches(head, exists) {
		// Let the store report the conflict, or answer a repeat.
		return s.Store.Append(ctx, stream, expected, events...)
	}
	runtime.Gosched() // the window between the check and the write
	return s.Store.Append(ctx, stream, eventstore.Any, events...)
}

func TestCatchesBrokenStores(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(eventstore.Store) eventstore.Store
	}{
		{"LaggingReads", func(s eventstore.Store) eventstore.Store { return laggingReads{s} }},
		{"CheckThenAppend", func(s eventstore.Store) eventstore.Store { return checkThenAppend{s} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := memory.New()
			t.Cleanup(func() { _ = s.Close() })
			opts := Quick()
			opts.VisualizationDir = t.TempDir()
			report, err := Verify(context.Background(), tc.wrap(s), opts)
			require.NoError(t, err)
			t.Log(report)
			require.Equal(t, NotLinearizable, report.Result)
			require.NoError(t, report.VisualizationErr)
			page, err := os.ReadFile(report.Visualization)
			require.NoError(t, err)
			assert.Contains(t, string(page), "append(linearize-", "the page describes the operations")
		})
	}
}

// yielding lets other goroutines run before each call reaches the store,
// as the wrappers above do inside their windows: on two cores the memory
// store's microsecond operations otherwise rarely overlap.
type yielding struct{ eventstore.Store }

func (s yielding) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	runtime.Gosched()
	return s.Store.Append(ctx, stream, expected, events...)
}

func (s yielding) ReadStream(ctx context.Context, stream string, opts eventstore.ReadOptions) iter.Seq2[eventstore.Event, error] {
	runtime.Gosched()
	return s.Store.ReadStream(ctx, stream, opts)
}

// The same workload on the memory store itself, with operations as
// drawn out as the broken wrappers', is linearizable: the verdicts above
// come from the bugs, not from the workload or the overlap.
func TestCorrectStorePasses(t *testing.T) {
	s := memory.New()
	t.Cleanup(func() { _ = s.Close() })
	opts := Quick()
	opts.CanceledAppendsWriteNothing = true
	report := Check(t, yielding{s}, opts)
	assert.Equal(t, Linearizable, report.Result)
	assert.Equal(t, opts.Operations, report.Operations, "every operation is in the history")
	assert.Positive(t, report.Fail, "some appends conflict")
	assert.Positive(t, report.Duplicates, "some retries are answered as duplicates")
	assert.Greater(t, report.Overlap, 1.0, "operations race")
}

// Merging alike operations (mergeAlike) must never change a verdict: on
// histories of a correct store and of a broken one, drawn out so that
// operations overlap and merge, the checker says the same of each history
// as recorded and as merged.
func TestMergingKeepsVerdicts(t *testing.T) {
	var merged, illegal int
	for seed := range uint64(16) {
		for broken, wrap := range []func(eventstore.Store) eventstore.Store{
			func(s eventstore.Store) eventstore.Store { return s },
			func(s eventstore.Store) eventstore.Store { return laggingReads{s} },
			func(s eventstore.Store) eventstore.Store { return checkThenAppend{s} },
		} {
			s := memory.New()
			store := wrap(yielding{s})
			opts, err := Options{Clients: 16, Streams: 2, Operations: 240, Seed: seed + 1, CanceledAppendsWriteNothing: true}.withDefaults()
			require.NoError(t, err)
			ids, err := newIDSpace()
			require.NoError(t, err)
			names := []string{"a", "b"}
			ops, _, err := (&recorder{store: store, opts: opts, names: names, ids: ids}).record(context.Background())
			require.NoError(t, err)
			require.NoError(t, s.Close())

			sealed := seal(ops, len(names), opts.Clients)
			fewer := mergeAlike(sealed)
			model := newModel(names)
			whole := porcupine.CheckOperationsTimeout(model, sealed, 10*time.Second)
			require.Equal(t, whole, porcupine.CheckOperationsTimeout(model, fewer, 10*time.Second),
				"seed %d, store %d: %d operations merged into %d", seed+1, broken, len(sealed), len(fewer))
			require.NotEqual(t, porcupine.Unknown, whole)
			merged += len(sealed) - len(fewer)
			if whole == porcupine.Illegal {
				illegal++
			}
		}
	}
	assert.Positive(t, merged, "some operations were merged")
	assert.Positive(t, illegal, "some histories were not linearizable")
	t.Logf("%d operations merged away; %d of 48 histories not linearizable", merged, illegal)
}
