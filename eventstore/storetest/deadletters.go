package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/oklog/ulid/v2"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/check"
)

// deadLetterTests check a [storekit.DeadLetterStore].
var deadLetterTests = []testCase[storekit.DeadLetterStore]{
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

func mustPark(t testing.TB, s storekit.DeadLetterStore, d eventstore.DeadLetter) eventstore.DeadLetter {
	t.Helper()
	got, err := s.ParkDeadLetter(context.Background(), d)
	check.NoError(t, err, "parking event %d part %d", d.Event.Version, d.Part)
	return got
}

func listDeadLetters(t testing.TB, s storekit.DeadLetterStore, consumer string) []eventstore.DeadLetter {
	t.Helper()
	var out []eventstore.DeadLetter
	for d, err := range s.DeadLetters(context.Background(), consumer) {
		check.NoError(t, err)
		out = append(out, d)
	}
	return out
}

// sameLetter compares dead letters, times to the millisecond (what every
// SQL store keeps at least).
func sameLetter(t testing.TB, want, got eventstore.DeadLetter) {
	t.Helper()
	check.Equal(t, got.ID, want.ID)
	check.Equal(t, got.Consumer, want.Consumer)
	check.Equal(t, got.Event.EventData, want.Event.EventData)
	check.Equal(t, got.Event.StreamID, want.Event.StreamID)
	check.Equal(t, got.Event.Version, want.Event.Version)
	check.Equal(t, got.Event.Position, want.Event.Position)
	check.Within(t, got.Event.RecordedAt, want.Event.RecordedAt, time.Millisecond)
	check.Equal(t, got.Part, want.Part)
	check.Equal(t, got.Error, want.Error)
	check.Equal(t, got.Attempts, want.Attempts)
	check.Within(t, got.FirstFailure, want.FirstFailure, time.Millisecond)
	check.Within(t, got.LastFailure, want.LastFailure, time.Millisecond)
	check.Within(t, got.ClaimedUntil, want.ClaimedUntil, time.Millisecond)
	check.Equal(t, got.Generation, want.Generation, "generation")
}

func testDeadLetterRoundTrip(t testing.TB, s storekit.DeadLetterStore) {
	ctx, name := context.Background(), consumerName(t, "dl")
	d := deadLetter(name, 3, 1)
	parked := mustPark(t, s, d)
	_, err := ulid.ParseStrict(parked.ID)
	check.NoError(t, err, "the assigned ID %q is not a ULID", parked.ID)
	d.ID, d.Generation = parked.ID, 1
	sameLetter(t, d, parked)
	got, err := s.DeadLetter(ctx, name, parked.ID)
	check.NoError(t, err)
	sameLetter(t, d, got)
	n, err := s.CountDeadLetters(ctx, name)
	check.NoError(t, err)
	check.Equal(t, n, 1)

	// What the store returns shares no memory with what it keeps.
	got.Event.Data[0] = 'X'
	got.Event.Metadata.Extra["k"] = "changed"
	again, err := s.DeadLetter(ctx, name, parked.ID)
	check.NoError(t, err)
	check.Equal(t, again.Event.Data, d.Event.Data)
	check.Equal(t, again.Event.Metadata.Extra["k"], "v")
}

func testDeadLetterRepark(t testing.TB, s storekit.DeadLetterStore) {
	ctx, name := context.Background(), consumerName(t, "repark")
	d := deadLetter(name, 3, 0)
	first := mustPark(t, s, d)
	// The same event and part again (a replay after a crash, or a failed
	// retry): one dead letter, updated, ID and first failure kept.
	d.Attempts, d.Error, d.LastFailure = 6, "still failing", d.LastFailure.Add(time.Minute)
	d.FirstFailure = d.FirstFailure.Add(time.Hour)
	second := mustPark(t, s, d)
	check.Equal(t, second.ID, first.ID)
	check.Within(t, second.FirstFailure, first.FirstFailure, time.Millisecond)
	check.Equal(t, second.Attempts, 6)
	check.Equal(t, second.Error, "still failing")
	all := listDeadLetters(t, s, name)
	check.Len(t, all, 1)
	check.Equal(t, all[0].Attempts, 6)
	check.Within(t, all[0].LastFailure, d.LastFailure, time.Millisecond)
	// Another part of the same event is another dead letter.
	other := mustPark(t, s, deadLetter(name, 3, 1))
	check.True(t, first.ID != other.ID, "two dead letters under one ID %q", first.ID)
	n, err := s.CountDeadLetters(ctx, name)
	check.NoError(t, err)
	check.Equal(t, n, 2)
}

// testDeadLetterSameIDTwoStreams: event IDs are unique per stream only, so
// the same ID and part in two streams are two dead letters: parking the
// second must not overwrite the first, and re-parking each updates only it.
func testDeadLetterSameIDTwoStreams(t testing.TB, s storekit.DeadLetterStore) {
	ctx, name := context.Background(), consumerName(t, "twostreams")
	a := deadLetter(name, 3, 0)
	b := a
	b.Event.StreamID = "order-2"
	b.Event.Position = checkpointAt(9, 2)
	b.Error = "other stream"
	parkedA := mustPark(t, s, a)
	parkedB := mustPark(t, s, b)
	check.True(t, parkedA.ID != parkedB.ID, "a dead letter of another stream took over the first one, %q", parkedA.ID)
	all := listDeadLetters(t, s, name)
	check.Len(t, all, 2)
	gotA, err := s.DeadLetter(ctx, name, parkedA.ID)
	check.NoError(t, err)
	a.ID, a.Generation = parkedA.ID, 1
	sameLetter(t, a, gotA)
	gotB, err := s.DeadLetter(ctx, name, parkedB.ID)
	check.NoError(t, err)
	b.ID, b.Generation = parkedB.ID, 1
	sameLetter(t, b, gotB)

	// Parking one of them again updates that one only.
	b.Attempts, b.Error, b.Generation = 9, "still failing in order-2", 0
	again := mustPark(t, s, b)
	check.Equal(t, again.ID, parkedB.ID)
	gotA, err = s.DeadLetter(ctx, name, parkedA.ID)
	check.NoError(t, err)
	check.Equal(t, gotA.Attempts, a.Attempts)
	check.Equal(t, gotA.Error, a.Error)
	gotB, err = s.DeadLetter(ctx, name, parkedB.ID)
	check.NoError(t, err)
	check.Equal(t, gotB.Attempts, 9)
	n, err := s.CountDeadLetters(ctx, name)
	check.NoError(t, err)
	check.Equal(t, n, 2)
}

func testDeadLetterList(t testing.TB, s storekit.DeadLetterStore) {
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
		check.Equal(t, d.Consumer, a)
		got = append(got, d.ID)
	}
	check.Equal(t, got, want, "oldest first, this consumer's only")
	check.Len(t, listDeadLetters(t, s, b), 1)
	check.Len(t, listDeadLetters(t, s, consumerName(t, "none")), 0)
	// A consumer may stop ranging early.
	for range s.DeadLetters(ctx, a) {
		break
	}
}

func testDeadLetterDelete(t testing.TB, s storekit.DeadLetterStore) {
	ctx, name := context.Background(), consumerName(t, "delete")
	d := mustPark(t, s, deadLetter(name, 1, 0))
	keep := mustPark(t, s, deadLetter(name, 2, 0))
	check.NoError(t, s.DeleteDeadLetter(ctx, name, d.ID))
	err := s.DeleteDeadLetter(ctx, name, d.ID)
	check.ErrorIs(t, err, eventstore.ErrDeadLetterNotFound)
	var nf *storekit.DeadLetterNotFoundError
	check.ErrorAs(t, err, &nf)
	check.Equal(t, nf.Consumer, name)
	check.Equal(t, nf.ID, d.ID)
	_, err = s.DeadLetter(ctx, name, d.ID)
	check.ErrorIs(t, err, eventstore.ErrDeadLetterNotFound)
	// Another consumer's ID is not found either.
	_, err = s.DeadLetter(ctx, consumerName(t, "other"), keep.ID)
	check.ErrorIs(t, err, eventstore.ErrDeadLetterNotFound)
	check.ErrorIs(t, s.DeleteDeadLetter(ctx, consumerName(t, "other"), keep.ID), eventstore.ErrDeadLetterNotFound)
	all := listDeadLetters(t, s, name)
	check.Len(t, all, 1)
	check.Equal(t, all[0].ID, keep.ID)
}

func testDeadLetterBadInput(t testing.TB, s storekit.DeadLetterStore) {
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
		check.ErrorIs(t, err, eventstore.ErrInvalidArgument, what)
	}
	check.Len(t, listDeadLetters(t, s, name), 0, "a refused dead letter was stored")
	_, err := s.CountDeadLetters(ctx, "")
	check.ErrorIs(t, err, eventstore.ErrInvalidArgument)
}

// CheckMigratedDeadLetter is for the migration tests of SQL stores whose
// earlier schema keyed dead letters by (consumer, event_id, part), or kept
// no generations: after the migration, want (the dead letter as the old
// schema stored it) reads back whole at its first generation, parking its
// event ID and part in another stream adds a dead letter instead of
// changing want, want is found by its position, and a compare-and-set on
// it works.
func CheckMigratedDeadLetter(t testing.TB, s storekit.DeadLetterStore, want eventstore.DeadLetter) {
	t.Helper()
	ctx := context.Background()
	want.Generation = 1 // what every migrated dead letter is at
	got, err := s.DeadLetter(ctx, want.Consumer, want.ID)
	check.NoError(t, err, "the dead letter of the old schema")
	sameLetter(t, want, got)
	before, err := s.CountDeadLetters(ctx, want.Consumer)
	check.NoError(t, err)

	other := want
	other.ID, other.Error, other.Generation = "", "the same event ID in another stream", 0
	other.Event.StreamID += "-other"
	other.Event.Position.Major += 1000
	parked := mustPark(t, s, other)
	check.True(t, want.ID != parked.ID, "the old key still holds: another stream took over the dead letter %q", want.ID)
	n, err := s.CountDeadLetters(ctx, want.Consumer)
	check.NoError(t, err)
	check.Equal(t, n, before+1)
	got, err = s.DeadLetter(ctx, want.Consumer, want.ID)
	check.NoError(t, err)
	sameLetter(t, want, got)

	// It is found by its position, and a retry's compare-and-set on its
	// first generation updates it.
	var keys []storekit.DeadLetterKey
	for k, err := range s.DeadLetterKeys(ctx, want.Consumer, eventstore.Start, want.Event.Position) {
		check.NoError(t, err)
		keys = append(keys, k)
	}
	check.True(t, slices.Contains(keys, storekit.KeyOf(want)), "the migrated dead letter by position: %+v not in %+v", storekit.KeyOf(want), keys)
	got.Error, got.ClaimedUntil = "retried after the migration", time.Now().Add(time.Minute)
	again, err := s.ParkDeadLetter(ctx, got)
	check.NoError(t, err)
	check.Equal(t, again.Generation, uint64(2))
	got, err = s.DeadLetter(ctx, want.Consumer, want.ID)
	check.NoError(t, err)
	check.Within(t, got.ClaimedUntil, again.ClaimedUntil, time.Millisecond, "a retry's claim on the migrated dead letter")
}
