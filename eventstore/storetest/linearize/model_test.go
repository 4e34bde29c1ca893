package linearize

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
)

// Hand-made histories on streams 0 and 1, each judged by the model. Times
// are the recorder's clock ticks; [call, return] intervals are closed.

func appendOp(client int, call, ret int64, stream int, expected eventstore.ExpectedVersion, ids []uint64, out appendOutput) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Call: call, Return: ret,
		Input: appendInput{stream: stream, expected: expected, ids: ids}, Output: out}
}

func readOp(client int, call, ret int64, stream int, opts eventstore.ReadOptions, ids []uint64, versions []uint64) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Call: call, Return: ret,
		Input: readInput{stream: stream, opts: opts}, Output: readOutput{ids: ids, versions: versions}}
}

func ok(first, last uint64) appendOutput {
	return appendOutput{outcome: appended, first: first, last: last}
}

func dup(first, last uint64) appendOutput {
	return appendOutput{outcome: appended, first: first, last: last, duplicate: true}
}

func conflict(actual eventstore.ExpectedVersion) appendOutput {
	return appendOutput{outcome: wrongVersion, actual: actual, actualKnown: true}
}

var (
	idConflictOut = appendOutput{outcome: idConflict}
	unknownOut    = appendOutput{outcome: unknown}
	canceledOut   = appendOutput{outcome: canceled}
	forward       = eventstore.Forward(0)
)

func TestModel(t *testing.T) {
	exact := eventstore.Exact
	cases := []struct {
		name string
		ops  []porcupine.Operation
		want bool
	}{
		{"a read after an append sees it", []porcupine.Operation{
			appendOp(0, 1, 2, 0, eventstore.NoStream, []uint64{1, 2}, ok(0, 1)),
			readOp(1, 3, 4, 0, forward, []uint64{1, 2}, []uint64{0, 1}),
		}, true},
		{"a read after an append misses it", []porcupine.Operation{
			appendOp(0, 1, 2, 0, eventstore.NoStream, []uint64{1, 2}, ok(0, 1)),
			readOp(1, 3, 4, 0, forward, nil, nil),
		}, false},
		{"reads during an append may see it or not", []porcupine.Operation{
			appendOp(0, 1, 10, 0, eventstore.NoStream, []uint64{1}, ok(0, 0)),
			readOp(1, 2, 3, 0, forward, nil, nil),
			readOp(2, 4, 5, 0, forward, []uint64{1}, []uint64{0}),
		}, true},
		{"a read misses what an earlier read saw", []porcupine.Operation{
			appendOp(0, 1, 10, 0, eventstore.NoStream, []uint64{1}, ok(0, 0)),
			readOp(1, 2, 3, 0, forward, []uint64{1}, []uint64{0}),
			readOp(2, 4, 5, 0, forward, nil, nil),
		}, false},
		{"a read gives an event the wrong version", []porcupine.Operation{
			appendOp(0, 1, 2, 0, eventstore.NoStream, []uint64{1, 2}, ok(0, 1)),
			readOp(1, 3, 4, 0, forward, []uint64{1, 2}, []uint64{0, 2}),
		}, false},
		{"a read yields an event that no append sent", []porcupine.Operation{
			appendOp(0, 1, 2, 0, eventstore.NoStream, []uint64{1}, ok(0, 0)),
			readOp(1, 3, 4, 0, forward, []uint64{1, 0}, []uint64{0, 1}),
		}, false},
		{"racing exact appends: one wins, the other sees its version", []porcupine.Operation{
			appendOp(0, 1, 4, 0, eventstore.NoStream, []uint64{1}, ok(0, 0)),
			appendOp(1, 2, 5, 0, eventstore.NoStream, []uint64{2}, conflict(exact(0))),
			appendOp(2, 3, 6, 0, exact(0), []uint64{3}, ok(1, 1)),
		}, true},
		{"racing exact appends both win", []porcupine.Operation{
			appendOp(0, 1, 4, 0, eventstore.NoStream, []uint64{1}, ok(0, 0)),
			appendOp(1, 2, 5, 0, eventstore.NoStream, []uint64{2}, ok(1, 1)),
		}, false},
		{"a conflict names a state the stream never had", []porcupine.Operation{
			appendOp(0, 1, 2, 0, eventstore.NoStream, []uint64{1}, ok(0, 0)),
			appendOp(1, 3, 4, 0, exact(5), []uint64{2}, conflict(exact(3))),
		}, false},
		{"StreamExists on an empty stream conflicts", []porcupine.Operation{
			appendOp(0, 1, 2, 0, eventstore.StreamExists, []uint64{1}, conflict(eventstore.NoStream)),
		}, true},
		{"StreamExists on an empty stream succeeds", []porcupine.Operation{
			appendOp(0, 1, 2, 0, eventstore.StreamExists, []uint64{1}, ok(0, 0)),
		}, false},
		{"a retry is answered with the earlier result", []porcupine.Operation{
			appendOp(0, 1, 2, 0, eventstore.NoStream, []uint64{1, 2}, ok(0, 1)),
			appendOp(1, 3, 4, 0, exact(1), []uint64{3}, ok(2, 2)),
			appendOp(0, 5, 6, 0, eventstore.NoStream, []uint64{1, 2}, dup(0, 1)),
			appendOp(0, 7, 8, 0, eventstore.Any, []uint64{1, 2}, dup(0, 1)),
			readOp(1, 9, 10, 0, forward, []uint64{1, 2, 3}, []uint64{0, 1, 2}),
		}, true},
		{"a retry is written again", []porcupine.Operation{
			appendOp(0, 1, 2, 0, eventstore.Any, []uint64{1}, ok(0, 0)),
			appendOp(0, 3, 4, 0, eventstore.Any, []uint64{1}, ok(1, 1)),
		}, false},
		{"a retry is not marked duplicate", []porcupine.Operation{
			appendOp(0, 1, 2, 0, eventstore.Any, []uint64{1}, ok(0, 0)),
			appendOp(0, 3, 4, 0, eventstore.Any, []uint64{1}, ok(0, 0)),
		}, false},
		{"a retry expecting another place conflicts", []porcupine.Operation{
			appendOp(0, 1, 2, 0, eventstore.NoStream, []uint64{1}, ok(0, 0)),
			appendOp(0, 3, 4, 0, eventstore.StreamExists, []uint64{1}, idConflictOut),
		}, true},
		{"a retry expecting another place is taken as a duplicate", []porcupine.Operation{
			appendOp(0, 1, 2, 0, eventstore.NoStream, []uint64{1}, ok(0, 0)),
			appendOp(0, 3, 4, 0, eventstore.StreamExists, []uint64{1}, dup(0, 0)),
		}, false},
		{"a partial repeat conflicts", []porcupine.Operation{
			appendOp(0, 1, 2, 0, eventstore.NoStream, []uint64{1, 2}, ok(0, 1)),
			appendOp(0, 3, 4, 0, eventstore.Any, []uint64{1, 9}, idConflictOut),
		}, true},
		{"a partial repeat is written", []porcupine.Operation{
			appendOp(0, 1, 2, 0, eventstore.NoStream, []uint64{1, 2}, ok(0, 1)),
			appendOp(0, 3, 4, 0, eventstore.Any, []uint64{1, 9}, ok(2, 3)),
		}, false},
		// An append of unknown outcome returned an error at time 2 to its
		// client; it may take effect at any time after its call, or never.
		{"an append of unknown outcome that took effect", []porcupine.Operation{
			appendOp(0, 1, 2, 0, eventstore.NoStream, []uint64{1}, unknownOut),
			readOp(1, 5, 6, 0, forward, []uint64{1}, []uint64{0}),
		}, true},
		{"an append of unknown outcome that took effect after its client gave up", []porcupine.Operation{
			appendOp(0, 1, 2, 0, eventstore.NoStream, []uint64{1}, unknownOut),
			readOp(1, 3, 4, 0, forward, nil, nil),
			readOp(1, 5, 6, 0, forward, []uint64{1}, []uint64{0}),
		}, true},
		{"an append of unknown outcome that did not take effect", []porcupine.Operation{
			appendOp(0, 1, 2, 0, eventstore.NoStream, []uint64{1}, unknownOut),
			readOp(1, 5, 6, 0, forward, nil, nil),
			appendOp(1, 7, 8, 0, eventstore.NoStream, []uint64{2}, ok(0, 0)),
			readOp(1, 9, 10, 0, forward, []uint64{2}, []uint64{0}),
		}, true},
		{"an append of unknown outcome that the stream passed by", []porcupine.Operation{
			appendOp(0, 1, 2, 0, eventstore.NoStream, []uint64{1}, ok(0, 0)),
			appendOp(0, 3, 4, 0, exact(5), []uint64{2}, unknownOut),
			appendOp(1, 5, 6, 0, exact(0), []uint64{3}, ok(1, 1)),
			readOp(1, 7, 8, 0, forward, []uint64{1, 3}, []uint64{0, 1}),
		}, true},
		{"appends of unknown outcome, one of which took effect", []porcupine.Operation{
			appendOp(0, 1, 2, 0, eventstore.Any, []uint64{1}, unknownOut),
			appendOp(1, 1, 2, 0, eventstore.Any, []uint64{2}, unknownOut),
			appendOp(2, 1, 2, 0, eventstore.Any, []uint64{3}, unknownOut),
			readOp(1, 7, 8, 0, forward, []uint64{2}, []uint64{0}),
		}, true},
		{"an append of unknown outcome seen before it was called", []porcupine.Operation{
			readOp(1, 1, 2, 0, forward, []uint64{1}, []uint64{0}),
			appendOp(0, 3, 4, 0, eventstore.NoStream, []uint64{1}, unknownOut),
		}, false},
		{"an append of unknown outcome takes effect only where it fits", []porcupine.Operation{
			appendOp(0, 1, 2, 0, exact(0), []uint64{1}, unknownOut),
			readOp(1, 5, 6, 0, forward, []uint64{1}, []uint64{0}),
		}, false},
		{"a retry of an append of unknown outcome that took effect", []porcupine.Operation{
			appendOp(0, 1, 2, 0, eventstore.NoStream, []uint64{1}, unknownOut),
			appendOp(0, 3, 4, 0, eventstore.NoStream, []uint64{1}, dup(0, 0)),
		}, true},
		{"a retry of an append of unknown outcome that did not", []porcupine.Operation{
			appendOp(0, 1, 2, 0, eventstore.NoStream, []uint64{1}, unknownOut),
			appendOp(0, 3, 4, 0, eventstore.NoStream, []uint64{1}, ok(0, 0)),
		}, true},
		{"a retry of an append of unknown outcome written twice", []porcupine.Operation{
			appendOp(0, 1, 2, 0, eventstore.Any, []uint64{1}, unknownOut),
			appendOp(0, 3, 4, 0, eventstore.Any, []uint64{1}, ok(0, 0)),
			readOp(1, 5, 6, 0, forward, []uint64{1, 1}, []uint64{0, 1}),
		}, false},
		{"a canceled append that wrote nothing", []porcupine.Operation{
			appendOp(0, 1, 2, 0, eventstore.NoStream, []uint64{1}, canceledOut),
			readOp(1, 3, 4, 0, forward, nil, nil),
		}, true},
		{"a canceled append that was written", []porcupine.Operation{
			appendOp(0, 1, 2, 0, eventstore.NoStream, []uint64{1}, canceledOut),
			readOp(1, 3, 4, 0, forward, []uint64{1}, []uint64{0}),
		}, false},
		{"backward and limited reads", []porcupine.Operation{
			appendOp(0, 1, 2, 0, eventstore.NoStream, []uint64{1, 2, 3}, ok(0, 2)),
			readOp(1, 3, 4, 0, eventstore.ReadOptions{From: eventstore.End, Backward: true, Limit: 2}, []uint64{3, 2}, []uint64{2, 1}),
			readOp(1, 5, 6, 0, eventstore.ReadOptions{From: 1, Limit: 5}, []uint64{2, 3}, []uint64{1, 2}),
			readOp(1, 7, 8, 0, eventstore.ReadOptions{From: 1, Backward: true}, []uint64{2, 1}, []uint64{1, 0}),
			readOp(1, 9, 10, 0, eventstore.ReadOptions{From: 3}, nil, nil),
		}, true},
		{"a backward read in forward order", []porcupine.Operation{
			appendOp(0, 1, 2, 0, eventstore.NoStream, []uint64{1, 2}, ok(0, 1)),
			readOp(1, 3, 4, 0, eventstore.Backward(eventstore.End), []uint64{1, 2}, []uint64{0, 1}),
		}, false},
		{"a read past its limit", []porcupine.Operation{
			appendOp(0, 1, 2, 0, eventstore.NoStream, []uint64{1, 2}, ok(0, 1)),
			readOp(1, 3, 4, 0, eventstore.ReadOptions{Limit: 1}, []uint64{1, 2}, []uint64{0, 1}),
		}, false},
		{"streams are independent", []porcupine.Operation{
			appendOp(0, 1, 2, 1, eventstore.NoStream, []uint64{1}, ok(0, 0)),
			readOp(1, 3, 4, 0, forward, nil, nil),
			appendOp(0, 5, 6, 0, eventstore.NoStream, []uint64{2}, ok(0, 0)),
		}, true},
		{"an event shows up in another stream", []porcupine.Operation{
			appendOp(0, 1, 2, 1, eventstore.NoStream, []uint64{1}, ok(0, 0)),
			readOp(1, 3, 4, 0, forward, []uint64{1}, []uint64{0}),
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ops := seal(tc.ops, 2, 3)
			model := newModel([]string{"s-0", "s-1"})
			want := porcupine.Illegal
			if tc.want {
				want = porcupine.Ok
			}
			assert.Equal(t, want, porcupine.CheckOperationsTimeout(model, ops, 10*time.Second))
			assert.Equal(t, want, porcupine.CheckOperationsTimeout(model, mergeAlike(ops), 10*time.Second), "merged")
		})
	}
}

func TestIDSpace(t *testing.T) {
	a, err := newIDSpace()
	require.NoError(t, err)
	b, err := newIDSpace()
	require.NoError(t, err)
	for _, n := range []uint64{1, 2, 255, 256, 1 << 40, maxOrdinal} {
		id := a.id(n)
		assert.Equal(t, n, a.ordinal(id), "ordinal %d round trip", n)
		assert.Equal(t, uint64(0), b.ordinal(id), "another history's ID is foreign")
		assert.Equal(t, byte(4), byte(id.Version()), "a version 4 UUID")
	}
	assert.NotEqual(t, a.id(1), b.id(1))
}

func TestOptions(t *testing.T) {
	_, err := Options{Clients: -1}.withDefaults()
	var oe *OptionError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, "Clients", oe.Field)

	_, err = Options{DeadlineRate: 1.5}.withDefaults()
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, "DeadlineRate", oe.Field)

	o, err := Options{}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, 16, o.Clients)
	assert.NotZero(t, o.Seed, "a zero seed picks one")

	t.Setenv(TortureEnv, "1")
	t.Setenv(SeedEnv, "42")
	t.Setenv(DirEnv, "/tmp/somewhere")
	o = Sized(t)
	assert.Equal(t, Torture().Clients, o.Clients)
	assert.Equal(t, uint64(42), o.Seed)
	assert.Equal(t, "/tmp/somewhere", o.VisualizationDir)
	t.Setenv(TortureEnv, "0")
	assert.Equal(t, Quick().Operations, Sized(t).Operations)
}

func TestMergeAlike(t *testing.T) {
	exact := eventstore.Exact
	ops := seal([]porcupine.Operation{
		appendOp(0, 1, 2, 0, eventstore.NoStream, []uint64{1}, ok(0, 0)),
		// Three losers of one race, whatever they expected, two of them
		// overlapping with the third at [6, 7].
		appendOp(1, 3, 7, 0, exact(3), []uint64{2}, conflict(exact(0))),
		appendOp(2, 4, 8, 0, eventstore.NoStream, []uint64{3}, conflict(exact(0))),
		appendOp(3, 6, 9, 0, exact(7), []uint64{4}, conflict(exact(0))),
		// Not alike: another stream, or no common instant.
		appendOp(4, 5, 9, 1, exact(7), []uint64{5}, conflict(eventstore.NoStream)),
		appendOp(5, 8, 10, 0, exact(7), []uint64{6}, conflict(exact(0))),
		// A conflict that no correct store reports stays as it is.
		appendOp(6, 5, 6, 0, exact(0), []uint64{7}, conflict(exact(0))),
		// Two reads that saw the same.
		readOp(7, 3, 5, 0, forward, []uint64{1}, []uint64{0}),
		readOp(8, 4, 6, 0, forward, []uint64{1}, []uint64{0}),
	}, 2, 9)
	merged := mergeAlike(ops)
	require.Len(t, merged, len(ops)-3)
	var conflicts []porcupine.Operation
	for _, op := range merged {
		if in, isAppend := op.Input.(appendInput); isAppend && in.stream == 0 && op.Output.(appendOutput).outcome == wrongVersion {
			conflicts = append(conflicts, op)
		}
	}
	require.Len(t, conflicts, 3)
	assert.Equal(t, []int64{6, 7, 3}, []int64{conflicts[0].Call, conflicts[0].Return, int64(conflicts[0].Metadata.(int))},
		"the three losers, over [6, 7]")
	assert.Equal(t, porcupine.Illegal, porcupine.CheckOperationsTimeout(newModel([]string{"s-0", "s-1"}), merged, 10*time.Second),
		"the impossible conflict still fails the history")
}
