package storetest

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/check"
)

// testDeadLetterGenerations: every park of a dead letter is a generation
// of it, and a park with the generation it read (a failed retry recording
// its failure) is a compare-and-set: it updates only that state, and
// brings back neither a dead letter parked again since nor one deleted.
func testDeadLetterGenerations(t testing.TB, s storekit.DeadLetterStore) {
	ctx, name := context.Background(), consumerName(t, "generations")
	d := deadLetter(name, 3, 0)
	first := mustPark(t, s, d)
	check.Equal(t, first.Generation, uint64(1), "a new dead letter's generation")
	second := mustPark(t, s, d) // in order, as a consumer parks: an upsert
	check.Equal(t, second.ID, first.ID)
	check.Equal(t, second.Generation, uint64(2), "parking again adds a generation")

	// The compare-and-set of the state read.
	read, err := s.DeadLetter(ctx, name, first.ID)
	check.NoError(t, err)
	check.Equal(t, read.Generation, uint64(2))
	read.Attempts, read.Error = 7, "failed once more"
	third, err := s.ParkDeadLetter(ctx, read)
	check.NoError(t, err)
	check.Equal(t, third.ID, first.ID)
	check.Equal(t, third.Generation, uint64(3))
	check.Within(t, third.FirstFailure, first.FirstFailure, 0)
	got, err := s.DeadLetter(ctx, name, first.ID)
	check.NoError(t, err)
	check.Equal(t, got.Attempts, 7)
	check.Equal(t, got.Error, "failed once more")
	check.Equal(t, got.Generation, uint64(3))

	// A state that is no longer the stored one writes nothing.
	read.Error = "stale"
	_, err = s.ParkDeadLetter(ctx, read)
	check.ErrorIs(t, err, eventstore.ErrDeadLetterChanged)
	check.True(t, !errors.Is(err, eventstore.ErrDeadLetterNotFound), "got %v", err)
	var changed *storekit.DeadLetterChangedError
	check.ErrorAs(t, err, &changed)
	check.Equal(t, *changed, storekit.DeadLetterChangedError{Consumer: name, ID: first.ID, Stream: d.Event.StreamID,
		Version: d.Event.Version, Part: d.Part, Generation: 2, Actual: 3})
	got, err = s.DeadLetter(ctx, name, first.ID)
	check.NoError(t, err)
	check.Equal(t, got.Error, "failed once more", "a stale compare-and-set wrote")

	// Nor does one of a dead letter deleted since: it stays deleted, and
	// a later park of its event is a new dead letter.
	check.NoError(t, s.DeleteDeadLetter(ctx, name, first.ID))
	got.Error = "after the skip"
	_, err = s.ParkDeadLetter(ctx, got)
	check.ErrorIs(t, err, eventstore.ErrDeadLetterChanged)
	check.ErrorIs(t, err, eventstore.ErrDeadLetterNotFound)
	check.Len(t, listDeadLetters(t, s, name), 0, "a compare-and-set brought back a deleted dead letter")
	fresh := mustPark(t, s, d)
	check.True(t, first.ID != fresh.ID, "the fresh dead letter took the old ID %q", first.ID)
	check.Equal(t, fresh.Generation, uint64(1))
	got.Error = "the old ID's state"
	_, err = s.ParkDeadLetter(ctx, got)
	check.ErrorIs(t, err, eventstore.ErrDeadLetterNotFound, "a compare-and-set by the old ID changed the new dead letter")

	// The ID of another event part's dead letter is refused.
	other := deadLetter(name, 4, 0)
	other.ID, other.Generation = fresh.ID, 1
	_, err = s.ParkDeadLetter(ctx, other)
	check.Invalid(t, err, "dead letter ID", "a compare-and-set on the dead letter of another event")
	other.ID = ulid.Make().String()
	_, err = s.ParkDeadLetter(ctx, other)
	check.ErrorIs(t, err, eventstore.ErrDeadLetterNotFound, "a compare-and-set on an ID no dead letter has")
	all := listDeadLetters(t, s, name)
	check.Len(t, all, 1)
	check.Equal(t, all[0].ID, fresh.ID)
}

// testDeadLetterKeys: the keys of a consumer's dead letters of events
// within a range of positions, in position order, without payloads, for
// positions whose halves span the whole of uint64 (below 2^63 for the
// major, as every stored event's).
func testDeadLetterKeys(t testing.TB, s storekit.DeadLetterStore) {
	ctx, name := context.Background(), consumerName(t, "keys")
	pos := func(major, minor uint64) eventstore.Position { return eventstore.Position{Major: major, Minor: minor} }
	var parked []eventstore.DeadLetter
	for i, p := range []eventstore.Position{pos(5, 0), pos(5, 7), pos(9, math.MaxUint64), pos(12, 0), pos(math.MaxInt64, math.MaxUint64)} {
		d := deadLetter(name, uint64(i), 0)
		d.Event.Position = p
		parked = append(parked, mustPark(t, s, d))
	}
	// A second part of the event at 9, and another consumer's dead letter.
	d := parked[2]
	d.ID, d.Part, d.Generation = "", 1, 0
	parked = append(parked, mustPark(t, s, d))
	mustPark(t, s, deadLetter(consumerName(t, "other"), 1, 0))
	again := parked[3]
	again.Generation = 0
	parked[3] = mustPark(t, s, again) // generation 2

	keys := func(after, through eventstore.Position) []storekit.DeadLetterKey {
		t.Helper()
		var out []storekit.DeadLetterKey
		for k, err := range s.DeadLetterKeys(ctx, name, after, through) {
			check.NoError(t, err)
			out = append(out, k)
		}
		return out
	}
	key := func(i int) storekit.DeadLetterKey { return storekit.KeyOf(parked[i]) }
	end := pos(math.MaxUint64, math.MaxUint64)
	check.Equal(t, keys(eventstore.Start, end), []storekit.DeadLetterKey{key(0), key(1), key(2), key(5), key(3), key(4)},
		"every key, by position and part")
	check.Equal(t, keys(pos(11, 0), pos(12, 0))[0].Generation, uint64(2))
	check.Equal(t, keys(pos(5, 0), pos(9, math.MaxUint64)), []storekit.DeadLetterKey{key(1), key(2), key(5)},
		"after the first, through the third: minors count")
	check.Equal(t, keys(pos(4, math.MaxUint64), pos(5, 6)), []storekit.DeadLetterKey{key(0)})
	check.Equal(t, keys(pos(12, 0), end), []storekit.DeadLetterKey{key(4)})
	check.Len(t, keys(pos(12, 0), pos(12, 0)), 0, "an empty range")
	check.Len(t, keys(pos(13, 0), pos(12, 0)), 0, "a range that ends before it starts")
	check.Len(t, keys(pos(math.MaxInt64, math.MaxUint64), end), 0)
	check.Len(t, keys(pos(math.MaxInt64+1, 0), end), 0, "after any stored position")
	for range s.DeadLetterKeys(ctx, name, eventstore.Start, end) {
		break // a caller may stop early
	}
	for _, err := range s.DeadLetterKeys(ctx, "", eventstore.Start, end) {
		check.ErrorIs(t, err, eventstore.ErrInvalidArgument)
	}
}

// testDeadLetterClaims: a dead letter keeps the claim each park gives it
// (a retry's, until a time), to the millisecond, on the first park, on a
// compare-and-set and on an upsert, and a park without one clears it.
func testDeadLetterClaims(t testing.TB, s storekit.DeadLetterStore) {
	ctx, name := context.Background(), consumerName(t, "claims")
	d := deadLetter(name, 3, 0)
	first := mustPark(t, s, d)
	check.True(t, first.ClaimedUntil.IsZero(), "a dead letter parked without a claim has one: %v", first.ClaimedUntil)
	read := func() eventstore.DeadLetter {
		t.Helper()
		got, err := s.DeadLetter(ctx, name, first.ID)
		check.NoError(t, err)
		return got
	}
	check.True(t, read().ClaimedUntil.IsZero())

	until := time.Date(2026, 12, 4, 3, 4, 5, 678_000_000, time.UTC)
	claim := read()
	claim.ClaimedUntil = until
	claimed, err := s.ParkDeadLetter(ctx, claim)
	check.NoError(t, err, "claiming by a compare-and-set")
	check.Within(t, claimed.ClaimedUntil, until, time.Millisecond)
	got := read()
	check.Within(t, got.ClaimedUntil, until, time.Millisecond, "the stored claim")
	check.Equal(t, got.Generation, claimed.Generation)
	for l, err := range s.DeadLetters(ctx, name) {
		check.NoError(t, err)
		check.Within(t, l.ClaimedUntil, until, time.Millisecond, "the listed claim")
	}

	// Renewed by another compare-and-set, then cleared by one.
	got.ClaimedUntil = until.Add(time.Minute)
	_, err = s.ParkDeadLetter(ctx, got)
	check.NoError(t, err)
	check.Within(t, read().ClaimedUntil, until.Add(time.Minute), time.Millisecond, "the renewed claim")
	cleared := read()
	cleared.ClaimedUntil = time.Time{}
	_, err = s.ParkDeadLetter(ctx, cleared)
	check.NoError(t, err)
	check.True(t, read().ClaimedUntil.IsZero(), "a compare-and-set without a claim left one")

	// An upsert (no generation) stores the claim it is given too.
	d.ClaimedUntil = until
	mustPark(t, s, d)
	check.Within(t, read().ClaimedUntil, until, time.Millisecond, "the claim an upsert gave")
	d.ClaimedUntil = time.Time{}
	mustPark(t, s, d)
	check.True(t, read().ClaimedUntil.IsZero(), "an upsert without a claim left one")

	// A new dead letter may be parked claimed.
	other := deadLetter(name, 4, 0)
	other.ClaimedUntil = until
	check.Within(t, mustPark(t, s, other).ClaimedUntil, until, time.Millisecond)
}
