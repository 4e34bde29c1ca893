package linearize

import (
	"fmt"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// The sequential specification below is written from the store contract
// ([eventstore.Store]), not from any store's code, and on purpose shares no
// helper with the stores (not even [storekit.CheckRepeat]): a bug in a
// helper the stores use must not be copied into the specification that
// judges them.

// stream is a stream's state in the model: its event ordinals (see ids.go)
// in version order, and their FNV-1a hash. A state is never modified: a
// step that appends returns a new one, as porcupine requires. The hash is
// kept as the stream grows because the checker hashes every state it
// reaches; rehashing a long stream each time made the check several times
// slower.
type stream struct {
	ids  []uint64
	hash uint64
	// ended is set past the stream's end marker (see seal).
	ended bool
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// emptyStream is a stream with no events.
func emptyStream() *stream { return &stream{hash: fnvOffset} }

// with returns the stream with ids appended.
func (s *stream) with(ids []uint64) *stream {
	n := len(s.ids)
	next := &stream{ids: append(s.ids[:n:n], ids...), hash: s.hash}
	for _, id := range ids {
		next.hash = (next.hash ^ id) * fnvPrime
	}
	return next
}

// end returns the stream past its end marker.
func (s *stream) end() *stream {
	return &stream{ids: s.ids, hash: s.hash ^ 1, ended: true}
}

// equal reports whether two states are the same.
func (s *stream) equal(o *stream) bool {
	return s == o || s.hash == o.hash && s.ended == o.ended && slices.Equal(s.ids, o.ids)
}

// appendInput is an Append as a client sent it.
type appendInput struct {
	stream   int
	expected eventstore.ExpectedVersion
	ids      []uint64 // ordinals of the events, in order
	// resent is set when another append of the history sends one of ids
	// too. Only then can the stream hold them before this append takes
	// effect, so only then does the model look for them: each event
	// ordinal is new otherwise, and each operation takes effect once.
	resent bool
}

// outcome is what became of an Append, in Jepsen's terms: ok, fail (it
// certainly wrote nothing) or info (unknown).
type outcome uint8

const (
	// appended: Append returned no error.
	appended outcome = iota
	// wrongVersion: Append returned ErrWrongVersion.
	wrongVersion
	// idConflict: Append returned ErrEventIDConflict.
	idConflict
	// canceled: Append returned the error of its context, which ended, on a
	// store that promises that such an append wrote nothing
	// ([Options.CanceledAppendsWriteNothing]).
	canceled
	// unknown: Append returned some other error, or its context's on a
	// store that does not promise anything then; it may or may not have
	// been written, now or later.
	unknown
)

// appendOutput is what Append returned.
type appendOutput struct {
	outcome     outcome
	first, last uint64 // appended
	duplicate   bool   // appended
	// actual is the stream state that a *WrongVersionError reported;
	// actualKnown is false when the error matched ErrWrongVersion without
	// being one.
	actual      eventstore.ExpectedVersion
	actualKnown bool
}

// readInput is a ReadStream as a client sent it.
type readInput struct {
	stream int
	opts   eventstore.ReadOptions
}

// readOutput is what a ReadStream yielded: the events' ordinals and the
// versions the store gave them.
type readOutput struct {
	ids      []uint64
	versions []uint64
}

// endInput is the end marker of a stream's history (see seal).
type endInput struct {
	stream int
}

// streamOf returns the stream an operation's input names, or -1 for an
// input this package did not record (which step rejects).
func streamOf(input any) int {
	switch in := input.(type) {
	case appendInput:
		return in.stream
	case readInput:
		return in.stream
	case endInput:
		return in.stream
	}
	return -1
}

// specAppend is what the contract says an Append does to a stream in state
// st: the result it must return and the state after it.
func specAppend(st *stream, in appendInput) (appendOutput, *stream) {
	n := uint64(len(st.ids))
	exists := n > 0
	// Appending IDs that the stream holds is never a new write: an exact
	// repeat at the place its expected version names is answered with the
	// earlier result, anything else is a conflict. This is decided before
	// the expected version is compared with the stream's state.
	if in.resent {
		if first, held, exact := findRepeat(st.ids, in.ids); held {
			if !exact || !repeatPlace(in.expected, first) {
				return appendOutput{outcome: idConflict}, st
			}
			return appendOutput{outcome: appended, first: first, last: first + uint64(len(in.ids)) - 1, duplicate: true}, st
		}
	}
	if !in.expected.Matches(n-1, exists) {
		return appendOutput{outcome: wrongVersion, actual: storekit.StreamState(n-1, exists), actualKnown: true}, st
	}
	return appendOutput{outcome: appended, first: n, last: n + uint64(len(in.ids)) - 1}, st.with(in.ids)
}

// findRepeat reports whether st holds any of ids (held), and whether it
// holds all of them, in order, at consecutive versions from first (exact).
func findRepeat(st, ids []uint64) (first uint64, held, exact bool) {
	at := make([]int, len(ids))
	for i := range at {
		at[i] = -1
	}
	for v, id := range st {
		for i, want := range ids {
			if id == want {
				at[i] = v
				held = true
			}
		}
	}
	if !held {
		return 0, false, false
	}
	for i := range at {
		if at[i] < 0 || at[i] != at[0]+i {
			return 0, true, false
		}
	}
	return uint64(at[0]), true, true
}

// repeatPlace reports whether an append expecting e would write its first
// event at version first.
func repeatPlace(e eventstore.ExpectedVersion, first uint64) bool {
	if v, exact := e.Version(); exact {
		return v+1 == first
	}
	switch {
	case e.IsNoStream():
		return first == 0
	case e.IsStreamExists():
		return first > 0
	}
	return true // Any
}

// readMatches reports whether got is what the contract says ReadStream
// yields from a stream in state st: the events from opts.From on, in
// opts' direction, up to opts.Limit, with their versions.
func readMatches(st *stream, opts eventstore.ReadOptions, got readOutput) bool {
	n := uint64(len(st.ids))
	var from, count uint64
	switch {
	case opts.Backward && n > 0:
		from = min(opts.From, n-1)
		count = from + 1
	case !opts.Backward && opts.From < n:
		from = opts.From
		count = n - from
	}
	if opts.Limit > 0 {
		count = min(count, uint64(opts.Limit))
	}
	if uint64(len(got.ids)) != count || len(got.versions) != len(got.ids) {
		return false
	}
	// From the last event yielded back: where two states of the same
	// length differ, they differ near their ends.
	for i := len(got.ids) - 1; i >= 0; i-- {
		v := from + uint64(i)
		if opts.Backward {
			v = from - uint64(i)
		}
		if got.versions[i] != v || got.ids[i] != st.ids[v] {
			return false
		}
	}
	return true
}

// step is the model's step function: whether a stream in state st can
// answer input with output, and its state after.
func step(state, input, output any) (bool, any) {
	st := state.(*stream)
	switch in := input.(type) {
	case appendInput:
		got := output.(appendOutput)
		switch {
		case got.outcome == canceled:
			return true, st
		case st.ended:
			// Only appends of unknown outcome come after the end marker:
			// those that never took effect.
			return got.outcome == unknown, st
		}
		want, next := specAppend(st, in)
		switch got.outcome {
		case unknown:
			// Before the end marker: where it took effect (see seal).
			return want.outcome == appended && !want.duplicate, next
		case wrongVersion:
			return want.outcome == wrongVersion && (!got.actualKnown || got.actual == want.actual), st
		case idConflict:
			return want.outcome == idConflict, st
		default:
			return want.outcome == appended && got.first == want.first && got.last == want.last &&
				got.duplicate == want.duplicate, next
		}
	case readInput:
		return !st.ended && readMatches(st, in.opts, output.(readOutput)), st
	case endInput:
		return !st.ended, st.end()
	}
	return false, st
}

// newModel returns the porcupine model of a set of independent streams,
// named names[i] in the visualization.
func newModel(names []string) porcupine.Model {
	return porcupine.Model{
		Partition:         partition,
		Init:              func() any { return emptyStream() },
		Step:              step,
		Equal:             func(a, b any) bool { return a.(*stream).equal(b.(*stream)) },
		Hash:              func(state any) uint64 { return state.(*stream).hash },
		DescribeOperation: func(input, output any) string { return describe(names, input, output) },
		DescribeOperationMetadata: func(info any) string {
			if n, ok := info.(int); ok {
				return fmt.Sprintf("one of %d alike operations merged into one (see mergeAlike)", n)
			}
			return ""
		},
		DescribeState: func(state any) string {
			st := state.(*stream)
			end := ""
			if st.ended {
				end = " (ended)"
			}
			return fmt.Sprintf("%d events%s: %s", len(st.ids), end, idList(st.ids))
		},
	}
}

// partition splits a history by stream: streams are independent objects,
// so a history is linearizable when each stream's part is, and porcupine
// checks the parts in parallel.
func partition(history []porcupine.Operation) [][]porcupine.Operation {
	var parts [][]porcupine.Operation
	index := map[int]int{}
	for _, op := range history {
		s := streamOf(op.Input)
		i, ok := index[s]
		if !ok {
			i = len(parts)
			index[s] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], op)
	}
	return parts
}

// describe renders an operation for the visualization.
func describe(names []string, input, output any) string {
	name := func(s int) string {
		if s >= 0 && s < len(names) {
			return names[s]
		}
		return fmt.Sprintf("stream %d", s)
	}
	switch in := input.(type) {
	case appendInput:
		call := fmt.Sprintf("append(%s, expected %s, %s)", name(in.stream), in.expected, idList(in.ids))
		out := output.(appendOutput)
		switch out.outcome {
		case appended:
			dup := ""
			if out.duplicate {
				dup = " duplicate"
			}
			return fmt.Sprintf("%s -> ok %d..%d%s", call, out.first, out.last, dup)
		case wrongVersion:
			if !out.actualKnown {
				return call + " -> wrong version"
			}
			return fmt.Sprintf("%s -> wrong version, actual %s", call, out.actual)
		case idConflict:
			return call + " -> event ID conflict"
		case canceled:
			return call + " -> canceled, nothing written"
		default:
			return call + " -> unknown"
		}
	case readInput:
		dir := "forward"
		from := fmt.Sprint(in.opts.From)
		if in.opts.Backward {
			dir = "backward"
			if in.opts.From == eventstore.End {
				from = "end"
			}
		}
		limit := ""
		if in.opts.Limit > 0 {
			limit = fmt.Sprintf(", limit %d", in.opts.Limit)
		}
		out := output.(readOutput)
		at := ""
		if len(out.versions) > 0 {
			at = fmt.Sprintf(" at %d..%d", out.versions[0], out.versions[len(out.versions)-1])
		}
		return fmt.Sprintf("read(%s, %s from %s%s) -> %d events%s: %s",
			name(in.stream), dir, from, limit, len(out.ids), at, idList(out.ids))
	case endInput:
		return fmt.Sprintf("end of %s: appends of unknown outcome placed after it never took effect", name(in.stream))
	}
	return fmt.Sprint(input, " -> ", output)
}

// idList renders ordinals as e1 e2 ..., eliding the middle of a long list.
func idList(ids []uint64) string {
	const edge = 4
	var b strings.Builder
	b.WriteByte('[')
	for i, id := range ids {
		if len(ids) > 2*edge+1 && i == edge {
			fmt.Fprintf(&b, " …%d more…", len(ids)-2*edge)
		}
		if len(ids) > 2*edge+1 && i >= edge && i < len(ids)-edge {
			continue
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		if id == 0 {
			b.WriteString("foreign")
		} else {
			fmt.Fprintf(&b, "e%d", id)
		}
	}
	b.WriteByte(']')
	return b.String()
}
