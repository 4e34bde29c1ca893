package sagatest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"testing"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/sagareplay"
	"github.com/cairn-es/cairn/saga"
)

// CheckHistory runs recorded instance histories through the current code
// of saga type t and fails the test for every step
// that the current code decides differently (other commands, other
// deadlines, another completion) or cannot decide (the recorded state or
// message no longer decodes), naming the instance, its stream and the
// step. Record histories with [WriteHistory] from saga.Runner.Export on a
// store that older code ran, keep them in testdata, and read them back
// with [ReadHistory]: a model change is then checked in CI before it
// meets the instances in production.
//
// Each step is decided from the state recorded before it, at the time it
// ran ([saga.Output.Now] returns that time), and only what it decided is
// compared, not the state it left. So a step added for new instances only
// leaves the recorded histories alone when it is gated on what old
// instances do not have: a state field that the starting handler now
// sets (a recorded start decides the same commands with or without
// setting it, and the later steps read the old state, without it), or,
// for a change of the starting step itself, the step's time against the
// release that brings it (out.Now() before it is an old instance's
// start).
func CheckHistory[S any](tb testing.TB, t *saga.Type[S], histories ...iter.Seq2[eventstore.Event, error]) {
	tb.Helper()
	for i, h := range histories {
		divergences, err := sagareplay.Replay(context.Background(), t, h)
		if err != nil {
			tb.Errorf("sagatest: history %d of %d: %v", i+1, len(histories), err)
			continue
		}
		for _, d := range divergences {
			tb.Errorf("sagatest: saga %q: %s", t.Name(), d)
		}
	}
}

// WriteHistory writes the events of history (what saga.Runner.Export
// yields) to w, one JSON object a line.
func WriteHistory(w io.Writer, history iter.Seq2[eventstore.Event, error]) error {
	enc := json.NewEncoder(w)
	for e, err := range history {
		if err != nil {
			return err
		}
		if err := enc.Encode(e); err != nil {
			return err
		}
	}
	return nil
}

// ReadHistory reads back a history written by [WriteHistory].
func ReadHistory(r io.Reader) iter.Seq2[eventstore.Event, error] {
	return func(yield func(eventstore.Event, error) bool) {
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 2*storekit.MaxEventSize)
		for line := 1; sc.Scan(); line++ {
			var e eventstore.Event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				yield(eventstore.Event{}, fmt.Errorf("sagatest: history line %d: %w", line, err))
				return
			}
			if !yield(e, nil) {
				return
			}
		}
		if err := sc.Err(); err != nil {
			yield(eventstore.Event{}, err)
		}
	}
}
