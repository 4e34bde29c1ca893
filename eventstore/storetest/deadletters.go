package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// DeadLetterFactory returns a new dead letter store for one test and
// registers its cleanup with t.Cleanup.
type DeadLetterFactory func(t *testing.T) storekit.DeadLetterStore

// RunDeadLetters runs the conformance suite of [storekit.DeadLetterStore]
// against the stores that newStore makes, each test on a store of its own.
func RunDeadLetters(t *testing.T, newStore DeadLetterFactory) {
	runCases(t, newStore, []testCase[storekit.DeadLetterStore]{
		{"RoundTripsEveryField", testDeadLetterRoundTrip},
		{"ParkingAgainUpdates", testDeadLetterRepark},
		{"SameEventIDInTwoStreams", testDeadLetterSameIDTwoStreams},
		{"ListsOldestFirstPerConsumer", testDeadLetterList},
		{"DeleteAndNotFound", testDeadLetterDelete},
		{"BadInput", testDeadLetterBadInput},
		{"BadInputTable", testDeadLetterBadTable},
		{"IDOfAnotherEvent", testDeadLetterIDTaken},
		{"LookupsByUnstorableID", testDeadLetterLookups},
		{"GenerationsGuardReparks", testDeadLetterGenerations},
		{"KeysByPosition", testDeadLetterKeys},
		{"ClaimsAsParked", testDeadLetterClaims},
	})
}

func deadLetter(consumer string, version uint64, part int) eventstore.DeadLetter {
	at := time.Date(2026, 3, 4, 5, 6, 7, 891_000_000, time.UTC)
	e := event("order.placed", "dead")
	e.Metadata = eventstore.Metadata{CorrelationID: "corr", Extra: map[string]string{"k": "v"}}
	return eventstore.DeadLetter{
		Consumer: consumer,
		Event: eventstore.Event{EventData: e, StreamID: "order-1", Version: version,
			Position: checkpointAt(version+1, 2), RecordedAt: at.Add(-time.Hour)},
		Part: part, Error: "handler: boom ✗", Attempts: 5,
		FirstFailure: at, LastFailure: at.Add(time.Second),
	}
}

func mustPark(t *testing.T, s storekit.DeadLetterStore, d eventstore.DeadLetter) eventstore.DeadLetter {
	t.Helper()
	got, err := s.ParkDeadLetter(context.Background(), d)
	require.NoError(t, err, "parking event %d part %d", d.Event.Version, d.Part)
	return got
}

func listDeadLetters(t *testing.T, s storekit.DeadLetterStore, consumer string) []eventstore.DeadLetter {
	t.Helper()
	var out []eventstore.DeadLetter
	for d, err := range s.DeadLetters(context.Background(), consumer) {
		require.NoError(t, err)
		out = append(out, d)
	}
	return out
}

// sameLetter compares dead letters, times to the millisecond (what every
// SQL store keeps at least).
func sameLetter(t *testing.T, want, got eventstore.DeadLetter) {
	t.Helper()
	assert.Equal(t, want.ID, got.ID)
	assert.Equal(t, want.Consumer, got.Consumer)
	assert.Equal(t, want.Event.EventData, got.Event.EventData)
	assert.Equal(t, want.Event.StreamID, got.Event.StreamID)
	assert.Equal(t, want.Event.Version, got.Event.Version)
	assert.Equal(t, want.Event.Position, got.Event.Position)
	assert.WithinDuration(t, want.Event.RecordedAt, got.Event.RecordedAt, time.Millisecond)
	assert.Equal(t, want.Part, got.Part)
	assert.Equal(t, want.Error, got.Error)
	assert.Equal(t, want.Attempts, got.Attempts)
	assert.WithinDuration(t, want.FirstFailure, got.FirstFailure, time.Millisecond)
	assert.WithinDuration(t, want.LastFailure, got.LastFailure, time.Millisecond)
	assert.WithinDuration(t, want.ClaimedUntil, got.ClaimedUntil, time.Millisecond)
	assert.Equal(t, want.Generation, got.Generation, "generation")
}

func testDeadLetterRoundTrip(t *testing.T, s storekit.DeadLetterStore) {
	ctx, name := context.Background(), consumerName(t, "dl")
	d := deadLetter(name, 3, 1)
	parked := mustPark(t, s, d)
	_, err := ulid.ParseStrict(parked.ID)
	require.NoError(t, err, "the assigned ID %q is not a ULID", parked.ID)
	d.ID, d.Generation = parked.ID, 1
	sameLetter(t, d, parked)
	got, err := s.DeadLetter(ctx, name, parked.ID)
	require.NoError(t, err)
	sameLetter(t, d, got)
	n, err := s.CountDeadLetters(ctx, name)
	require.NoError(t, err)
	assert.Equal(t, 1, n)

	// What the store returns shares no memory with what it keeps.
	got.Event.Data[0] = 'X'
	got.Event.Metadata.Extra["k"] = "changed"
	again, err := s.DeadLetter(ctx, name, parked.ID)
	require.NoError(t, err)
	assert.Equal(t, d.Event.Data, again.Event.Data)
	assert.Equal(t, "v", again.Event.Metadata.Extra["k"])
}

func testDeadLetterRepark(t *testing.T, s storekit.DeadLetterStore) {
	ctx, name := context.Background(), consumerName(t, "repark")
	d := deadLetter(name, 3, 0)
	first := mustPark(t, s, d)
	// The same event and part again (a replay after a crash, or a failed
	// retry): one dead letter, updated, ID and first failure kept.
	d.Attempts, d.Error, d.LastFailure = 6, "still failing", d.LastFailure.Add(time.Minute)
	d.FirstFailure = d.FirstFailure.Add(time.Hour)
	second := mustPark(t, s, d)
	assert.Equal(t, first.ID, second.ID)
	assert.WithinDuration(t, first.FirstFailure, second.FirstFailure, time.Millisecond)
	assert.Equal(t, 6, second.Attempts)
	assert.Equal(t, "still failing", second.Error)
	all := listDeadLetters(t, s, name)
	require.Len(t, all, 1)
	assert.Equal(t, 6, all[0].Attempts)
	assert.WithinDuration(t, d.LastFailure, all[0].LastFailure, time.Millisecond)
	// Another part of the same event is another dead letter.
	other := mustPark(t, s, deadLetter(name, 3, 1))
	assert.NotEqual(t, first.ID, other.ID)
	n, err := s.CountDeadLetters(ctx, name)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
}

// testDeadLetterSameIDTwoStreams: event IDs are unique per stream only, so
// the same ID and part in two streams are two dead letters: parking the
// second must not overwrite the first, and re-parking each updates only it.
func testDeadLetterSameIDTwoStreams(t *testing.T, s storekit.DeadLetterStore) {
	ctx, name := context.Background(), consumerName(t, "twostreams")
	a := deadLetter(name, 3, 0)
	b := a
	b.Event.StreamID = "order-2"
	b.Event.Position = checkpointAt(9, 2)
	b.Error = "other stream"
	parkedA := mustPark(t, s, a)
	parkedB := mustPark(t, s, b)
	assert.NotEqual(t, parkedA.ID, parkedB.ID, "a dead letter of another stream took over the first one")
	all := listDeadLetters(t, s, name)
	require.Len(t, all, 2)
	gotA, err := s.DeadLetter(ctx, name, parkedA.ID)
	require.NoError(t, err)
	a.ID, a.Generation = parkedA.ID, 1
	sameLetter(t, a, gotA)
	gotB, err := s.DeadLetter(ctx, name, parkedB.ID)
	require.NoError(t, err)
	b.ID, b.Generation = parkedB.ID, 1
	sameLetter(t, b, gotB)

	// Parking one of them again updates that one only.
	b.Attempts, b.Error, b.Generation = 9, "still failing in order-2", 0
	again := mustPark(t, s, b)
	assert.Equal(t, parkedB.ID, again.ID)
	gotA, err = s.DeadLetter(ctx, name, parkedA.ID)
	require.NoError(t, err)
	assert.Equal(t, a.Attempts, gotA.Attempts)
	assert.Equal(t, a.Error, gotA.Error)
	gotB, err = s.DeadLetter(ctx, name, parkedB.ID)
	require.NoError(t, err)
	assert.Equal(t, 9, gotB.Attempts)
	n, err := s.CountDeadLetters(ctx, name)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
}

func testDeadLetterList(t *testing.T, s storekit.DeadLetterStore) {
	ctx := context.Background()
	a, b := consumerName(t, "a"), consumerName(t, "b")
	var want []string
	for v := range uint64(5) {
		want = append(want, mustPark(t, s, deadLetter(a, v, 0)).ID)
		time.Sleep(2 * time.Millisecond) // ULIDs order by millisecond
	}
	mustPark(t, s, deadLetter(b, 9, 0))
	var got []string
	for _, d := range listDeadLetters(t, s, a) {
		assert.Equal(t, a, d.Consumer)
		got = append(got, d.ID)
	}
	assert.Equal(t, want, got, "oldest first, this consumer's only")
	assert.Len(t, listDeadLetters(t, s, b), 1)
	assert.Empty(t, listDeadLetters(t, s, consumerName(t, "none")))
	// A consumer may stop ranging early.
	for range s.DeadLetters(ctx, a) {
		break
	}
}

func testDeadLetterDelete(t *testing.T, s storekit.DeadLetterStore) {
	ctx, name := context.Background(), consumerName(t, "delete")
	d := mustPark(t, s, deadLetter(name, 1, 0))
	keep := mustPark(t, s, deadLetter(name, 2, 0))
	require.NoError(t, s.DeleteDeadLetter(ctx, name, d.ID))
	err := s.DeleteDeadLetter(ctx, name, d.ID)
	require.ErrorIs(t, err, eventstore.ErrDeadLetterNotFound)
	var nf *storekit.DeadLetterNotFoundError
	require.ErrorAs(t, err, &nf)
	assert.Equal(t, name, nf.Consumer)
	assert.Equal(t, d.ID, nf.ID)
	_, err = s.DeadLetter(ctx, name, d.ID)
	require.ErrorIs(t, err, eventstore.ErrDeadLetterNotFound)
	// Another consumer's ID is not found either.
	_, err = s.DeadLetter(ctx, consumerName(t, "other"), keep.ID)
	require.ErrorIs(t, err, eventstore.ErrDeadLetterNotFound)
	require.ErrorIs(t, s.DeleteDeadLetter(ctx, consumerName(t, "other"), keep.ID), eventstore.ErrDeadLetterNotFound)
	all := listDeadLetters(t, s, name)
	require.Len(t, all, 1)
	assert.Equal(t, keep.ID, all[0].ID)
}

func testDeadLetterBadInput(t *testing.T, s storekit.DeadLetterStore) {
	ctx, name := context.Background(), consumerName(t, "bad")
	for what, mutate := range map[string]func(*eventstore.DeadLetter){
		"empty consumer": func(d *eventstore.DeadLetter) { d.Consumer = "" },
		"zero event ID":  func(d *eventstore.DeadLetter) { d.Event.ID = uuid.Nil },
		"no stream":      func(d *eventstore.DeadLetter) { d.Event.StreamID = "" },
		"zero position":  func(d *eventstore.DeadLetter) { d.Event.Position = eventstore.Start },
		"negative part":  func(d *eventstore.DeadLetter) { d.Part = -1 },
		"malformed ID":   func(d *eventstore.DeadLetter) { d.ID = "not-a-ulid" },
	} {
		d := deadLetter(name, 1, 0)
		mutate(&d)
		_, err := s.ParkDeadLetter(ctx, d)
		assert.ErrorIs(t, err, eventstore.ErrInvalidArgument, what)
	}
	assert.Empty(t, listDeadLetters(t, s, name), "a refused dead letter was stored")
	_, err := s.CountDeadLetters(ctx, "")
	assert.ErrorIs(t, err, eventstore.ErrInvalidArgument)
}

// CheckMigratedDeadLetter is for the migration tests of SQL stores whose
// earlier schema keyed dead letters by (consumer, event_id, part), or kept
// no generations: after the migration, want (the dead letter as the old
// schema stored it) reads back whole at its first generation, parking its
// event ID and part in another stream adds a dead letter instead of
// changing want, want is found by its position, and a compare-and-set on
// it works.
func CheckMigratedDeadLetter(t *testing.T, s storekit.DeadLetterStore, want eventstore.DeadLetter) {
	t.Helper()
	ctx := context.Background()
	want.Generation = 1 // what every migrated dead letter is at
	got, err := s.DeadLetter(ctx, want.Consumer, want.ID)
	require.NoError(t, err, "the dead letter of the old schema")
	sameLetter(t, want, got)
	before, err := s.CountDeadLetters(ctx, want.Consumer)
	require.NoError(t, err)

	other := want
	other.ID, other.Error, other.Generation = "", "the same event ID in another stream", 0
	other.Event.StreamID += "-other"
	other.Event.Position.Major += 1000
	parked := mustPark(t, s, other)
	assert.NotEqual(t, want.ID, parked.ID, "the old key still holds: another stream took over the dead letter")
	n, err := s.CountDeadLetters(ctx, want.Consumer)
	require.NoError(t, err)
	assert.Equal(t, before+1, n)
	got, err = s.DeadLetter(ctx, want.Consumer, want.ID)
	require.NoError(t, err)
	sameLetter(t, want, got)

	// It is found by its position, and a retry's compare-and-set on its
	// first generation updates it.
	var keys []storekit.DeadLetterKey
	for k, err := range s.DeadLetterKeys(ctx, want.Consumer, eventstore.Start, want.Event.Position) {
		require.NoError(t, err)
		keys = append(keys, k)
	}
	assert.Contains(t, keys, storekit.KeyOf(want), "the migrated dead letter by position")
	got.Error, got.ClaimedUntil = "retried after the migration", time.Now().Add(time.Minute)
	again, err := s.ParkDeadLetter(ctx, got)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), again.Generation)
	got, err = s.DeadLetter(ctx, want.Consumer, want.ID)
	require.NoError(t, err)
	assert.WithinDuration(t, again.ClaimedUntil, got.ClaimedUntil, time.Millisecond, "a retry's claim on the migrated dead letter")
}
