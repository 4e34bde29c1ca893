package linearize

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/anishathalye/porcupine"
)

// What happens to a recorded history before the checker sees it: nothing
// here changes whether it is linearizable.

// seal makes a recorded history ready for the checker. It marks the
// appends that share event IDs with another (see appendInput.resent), and
// gives each stream an end marker, called and returning after every
// operation has returned, with the appends of unknown outcome returning
// after the markers.
//
// porcupine has no notion of a pending operation; one that returns after
// every other can be linearized anywhere after its call (porcupine issue
// 8). An append of unknown outcome either took effect somewhere after its
// call or never did, and one that never did may as well be linearized
// after the end marker, where nothing observes it. So before the marker
// the model takes such an append only where it writes, and after it only
// as a no-op. Were it a no-op anywhere, the checker would take it as one
// at its first chance and, whenever it backtracks past that, try every
// combination of these appends with the other operations that change
// nothing.
func seal(ops []porcupine.Operation, streams, endClient int) []porcupine.Operation {
	markResent(ops)
	var latest int64
	for _, op := range ops {
		if out, ok := op.Output.(appendOutput); !ok || out.outcome != unknown {
			latest = max(latest, op.Return)
		} else {
			latest = max(latest, op.Call)
		}
	}
	for i := range ops {
		if out, ok := ops[i].Output.(appendOutput); ok && out.outcome == unknown {
			ops[i].Return = latest + 3
		}
	}
	for s := range streams {
		ops = append(ops, porcupine.Operation{ClientId: endClient, Input: endInput{stream: s}, Call: latest + 1, Return: latest + 2})
	}
	return ops
}

// alike is the key under which mergeAlike merges operations: the stream,
// and what decides where in a history the operation fits.
type alike struct {
	stream int
	kind   uint8
	// what: the actual state of a conflict; a read's options and what it
	// yielded.
	what string
}

// alikeKey returns an operation's key, and false for an operation that
// mergeAlike leaves alone.
//
// Conflicts (wrong version, with the actual state) fit where the stream
// is in that state, whatever version they expected (if it differs from
// the actual one): 15 clients that lost the same race are alike. Reads
// with the same options that yielded the same events are alike. Canceled
// appends fit everywhere. Appends that may write are never merged, nor
// are those that share event IDs with another, nor conflicts that a
// correct store never returns (expecting the very state they report):
// those must stay as they are to fail the check.
func alikeKey(op porcupine.Operation) (alike, bool) {
	switch in := op.Input.(type) {
	case appendInput:
		out := op.Output.(appendOutput)
		switch {
		case out.outcome == canceled:
			return alike{stream: in.stream, kind: 1}, true
		case in.resent || out.outcome != wrongVersion || !out.actualKnown:
			return alike{}, false
		}
		last, exists := out.actual.Version()
		if in.expected.Matches(last, exists) {
			return alike{}, false
		}
		return alike{stream: in.stream, kind: 2, what: out.actual.String()}, true
	case readInput:
		out := op.Output.(readOutput)
		return alike{stream: in.stream, kind: 3, what: fmt.Sprint(in.opts, out.ids, out.versions)}, true
	}
	return alike{}, false
}

// mergeAlike replaces each group of alike operations whose call-to-return
// intervals share an instant by one operation over their common interval.
//
// This does not change whether a history is linearizable. Alike operations
// change nothing and fit the same states; since streams only grow, the
// states they fit make one unbroken stretch of any linearization. If the
// history is linearizable, two alike operations sit at instants p1 <= p2
// of that stretch, within their intervals; then some instant of [p1, p2]
// also lies in both intervals (their intersection starts at or before p2
// and ends at or after p1), and one operation there does the work of both.
// Conversely, two operations can sit where their merged one sits. By
// Helly's theorem for intervals, operations whose intervals meet pairwise
// share an instant, so the argument extends to a group.
//
// It matters because porcupine, when it backtracks, tries every subset of
// the operations that change nothing and fit the current state, and with
// 64 clients 10 or more of them often lost the same race. Together with
// the end markers (seal) and the workload's choices (freshAppend, run), it
// took the check of a PostgreSQL history of 6,000 operations from more
// than ten minutes (the checker gave up) to under a second.
func mergeAlike(ops []porcupine.Operation) []porcupine.Operation {
	order := make([]int, len(ops))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(ops[a].Call, ops[b].Call) })
	open := map[alike]int{} // the group being built, by its index in merged
	var merged []porcupine.Operation
	for _, i := range order {
		op := ops[i]
		key, ok := alikeKey(op)
		if !ok {
			merged = append(merged, op)
			continue
		}
		if g, found := open[key]; found && merged[g].Return >= op.Call {
			// Calls come in order, so the group's interval, from its
			// latest call to its earliest return, meets op's.
			merged[g].Call = op.Call
			merged[g].Return = min(merged[g].Return, op.Return)
			n, _ := merged[g].Metadata.(int)
			merged[g].Metadata = max(n, 1) + 1
			continue
		}
		open[key] = len(merged)
		merged = append(merged, op)
	}
	return merged
}

// markResent sets resent on every append that shares an event ID with
// another append of ops.
func markResent(ops []porcupine.Operation) {
	sends := map[uint64]int{}
	for _, op := range ops {
		if in, ok := op.Input.(appendInput); ok {
			for _, id := range in.ids {
				sends[id]++
			}
		}
	}
	for i := range ops {
		if in, ok := ops[i].Input.(appendInput); ok {
			for _, id := range in.ids {
				if sends[id] > 1 {
					in.resent = true
					ops[i].Input = in
					break
				}
			}
		}
	}
}
