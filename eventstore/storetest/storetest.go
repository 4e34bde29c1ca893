// Package storetest is the conformance suite that every
// [eventstore.Store] passes unchanged, in the spirit of testing/fstest.
//
// A store's own test calls [Run] with a factory:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) eventstore.Store {
//			s := memory.New()
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// The suite names its streams uniquely, so it also runs against a store
// that already holds events (a shared server), but each factory call should
// return a new store where that is cheap.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/check"
)

// Factory returns a new store for one test and registers its cleanup with
// t.Cleanup. The suite may call Close itself; Close must be idempotent.
type Factory func(t *testing.T) eventstore.Store

// Run runs the whole conformance suite against the stores that newStore
// makes, each test on a store of its own.
func Run(t *testing.T, newStore Factory) {
	groups := []struct {
		name  string
		tests []test
	}{
		{"Append", appendTests},
		{"Idempotency", idempotencyTests},
		{"BadInput", badInputTests},
		{"Read", readTests},
		{"Subscribe", subscribeTests},
		{"Concurrency", concurrencyTests},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) { runCases(t, newStore, g.tests) })
	}
}

// testCase is one conformance test of a store of type S.
type testCase[S any] struct {
	name string
	run  func(t *testing.T, s S)
}

// test is a case of the event store suite.
type test = testCase[eventstore.Store]

// runCases runs each case as a subtest, on a store of its own.
func runCases[S any](t *testing.T, newStore func(t *testing.T) S, cases []testCase[S]) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newStore(t)) })
	}
}

// waitLimit bounds how long the suite waits for something that must happen
// (a live event to arrive, a canceled subscription to end). It is a
// liveness bound, far above any healthy store's latency, not a speed check.
const waitLimit = 15 * time.Second

// names hands out stream names that no other test run uses, all in one
// category so that a prefix filter selects exactly this test's streams.
type names struct{ category string }

func newNames(t *testing.T) names {
	var b [6]byte
	_, err := rand.Read(b[:])
	check.NoError(t, err)
	return names{category: "st" + hex.EncodeToString(b[:])}
}

// stream returns the stream of entity id in this test's category.
func (n names) stream(id string) string { return n.category + "-" + id }

// filter selects this test's streams.
func (n names) filter() eventstore.Filter {
	return eventstore.Filter{StreamPrefixes: []string{eventstore.Category(n.category)}}
}

// event returns an event with a fresh ID, the given type and a small payload.
func event(typ string, payload string) eventstore.EventData {
	return eventstore.EventData{
		ID:            uuid.New(),
		Type:          typ,
		SchemaVersion: 1,
		Data:          []byte(fmt.Sprintf(`{"payload":%q}`, payload)),
	}
}

// events returns n events of type typ.
func events(typ string, n int) []eventstore.EventData {
	out := make([]eventstore.EventData, n)
	for i := range out {
		out[i] = event(typ, fmt.Sprint(i))
	}
	return out
}

// readStream collects a whole stream read, failing the test on error.
func readStream(t *testing.T, s eventstore.Store, stream string, opts eventstore.ReadOptions) []eventstore.Event {
	t.Helper()
	var out []eventstore.Event
	for e, err := range s.ReadStream(context.Background(), stream, opts) {
		check.NoError(t, err, "reading stream %q", stream)
		out = append(out, e)
	}
	return out
}

// readAll collects a whole ReadAll, failing the test on error.
func readAll(t *testing.T, s eventstore.Store, after eventstore.Position, f eventstore.Filter) []eventstore.Event {
	t.Helper()
	var out []eventstore.Event
	for e, err := range s.ReadAll(context.Background(), after, f) {
		check.NoError(t, err, "reading all after %s", after)
		out = append(out, e)
	}
	return out
}

// ids returns the IDs of events to append, in order.
func ids(events []eventstore.EventData) []uuid.UUID {
	out := make([]uuid.UUID, len(events))
	for i, e := range events {
		out[i] = e.ID
	}
	return out
}

// recordedIDs returns the IDs of recorded events, in order.
func recordedIDs(events []eventstore.Event) []uuid.UUID {
	out := make([]uuid.UUID, len(events))
	for i, e := range events {
		out[i] = e.ID
	}
	return out
}

// mustAppend appends and fails the test on error.
func mustAppend(t *testing.T, s eventstore.Store, stream string, expected eventstore.ExpectedVersion, evs ...eventstore.EventData) eventstore.AppendResult {
	t.Helper()
	r, err := s.Append(context.Background(), stream, expected, evs...)
	check.NoError(t, err, "append to %q expecting %s", stream, expected)
	return r
}

// requireIncreasing checks that positions strictly increase.
func requireIncreasing(t *testing.T, evs []eventstore.Event) {
	t.Helper()
	for i := 1; i < len(evs); i++ {
		check.True(t, evs[i-1].Position.Before(evs[i].Position),
			"position %s (event %d) is not before %s (event %d)", evs[i-1].Position, i-1, evs[i].Position, i)
	}
}
