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
	never         = int64(1 << 40) // the return time of an append of unknown outcome
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
		{"an append of unknown outcome that took effect", []porcupine.Operation{
			appendOp(0, 1, never, 0, eventstore.NoStream, []uint64{1}, unknownOut),
			readOp(1, 5, 6, 0, forward, []uint64{1}, []uint64{0}),
		}, true},
		{"an append of unknown outcome that did not", []porcupine.Operation{
			appendOp(0, 1, never, 0, eventstore.NoStream, []uint64{1}, unknownOut),
			readOp(1, 5, 6, 0, forward, nil, nil),
			appendOp(1, 7, 8, 0, eventstore.NoStream, []uint64{2}, ok(0, 0)),
			readOp(1, 9, 10, 0, forward, []uint64{2}, []uint64{0}),
		}, true},
		{"an append of unknown outcome seen before it was called", []porcupine.Operation{
			readOp(1, 1, 2, 0, forward, []uint64{1}, []uint64{0}),
			appendOp(0, 3, never, 0, eventstore.NoStream, []uint64{1}, unknownOut),
		}, false},
		{"an append of unknown outcome takes effect only where it fits", []porcupine.Operation{
			appendOp(0, 1, never, 0, exact(0), []uint64{1}, unknownOut),
			readOp(1, 5, 6, 0, forward, []uint64{1}, []uint64{0}),
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
			markResent(tc.ops)
			got := porcupine.CheckOperationsTimeout(newModel([]string{"s-0", "s-1"}), tc.ops, 10*time.Second)
			want := porcupine.Illegal
			if tc.want {
				want = porcupine.Ok
			}
			assert.Equal(t, want, got)
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
