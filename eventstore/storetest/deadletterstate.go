package storetest

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// testDeadLetterGenerations: every park of a dead letter is a generation
// of it, and a park with the generation it read (a failed retry recording
// its failure) is a compare-and-set: it updates only that state, and
// brings back neither a dead letter parked again since nor one deleted.
func testDeadLetterGenerations(t *testing.T, s storekit.DeadLetterStore) {
	ctx, name := context.Background(), consumerName(t, "generations")
	d := deadLetter(name, 3, 0)
	first := mustPark(t, s, d)
	assert.Equal(t, uint64(1), first.Generation, "a new dead letter's generation")
	second := mustPark(t, s, d) // in order, as a consumer parks: an upsert
	assert.Equal(t, first.ID, second.ID)
	assert.Equal(t, uint64(2), second.Generation, "parking again adds a generation")

	// The compare-and-set of the state read.
	read, err := s.DeadLetter(ctx, name, first.ID)
	require.NoError(t, err)
	require.Equal(t, uint64(2), read.Generation)
	read.Attempts, read.Error = 7, "failed once more"
	third, err := s.ParkDeadLetter(ctx, read)
	require.NoError(t, err)
	assert.Equal(t, first.ID, third.ID)
	assert.Equal(t, uint64(3), third.Generation)
	assert.WithinDuration(t, first.FirstFailure, third.FirstFailure, 0)
	got, err := s.DeadLetter(ctx, name, first.ID)
	require.NoError(t, err)
	assert.Equal(t, 7, got.Attempts)
	assert.Equal(t, "failed once more", got.Error)
	assert.Equal(t, uint64(3), got.Generation)

	// A state that is no longer the stored one writes nothing.
	read.Error = "stale"
	_, err = s.ParkDeadLetter(ctx, read)
	require.ErrorIs(t, err, eventstore.ErrDeadLetterChanged)
	assert.NotErrorIs(t, err, eventstore.ErrDeadLetterNotFound)
	var changed *storekit.DeadLetterChangedError
	require.ErrorAs(t, err, &changed)
	assert.Equal(t, storekit.DeadLetterChangedError{Consumer: name, ID: first.ID, Stream: d.Event.StreamID,
		Version: d.Event.Version, Part: d.Part, Generation: 2, Actual: 3}, *changed)
	got, err = s.DeadLetter(ctx, name, first.ID)
	require.NoError(t, err)
	assert.Equal(t, "failed once more", got.Error, "a stale compare-and-set wrote")

	// Nor does one of a dead letter deleted since: it stays deleted, and
	// a later park of its event is a new dead letter.
	require.NoError(t, s.DeleteDeadLetter(ctx, name, first.ID))
	got.Error = "after the skip"
	_, err = s.ParkDeadLetter(ctx, got)
	require.ErrorIs(t, err, eventstore.ErrDeadLetterChanged)
	require.ErrorIs(t, err, eventstore.ErrDeadLetterNotFound)
	assert.Empty(t, listDeadLetters(t, s, name), "a compare-and-set brought back a deleted dead letter")
	fresh := mustPark(t, s, d)
	assert.NotEqual(t, first.ID, fresh.ID)
	assert.Equal(t, uint64(1), fresh.Generation)
	got.Error = "the old ID's state"
	_, err = s.ParkDeadLetter(ctx, got)
	require.ErrorIs(t, err, eventstore.ErrDeadLetterNotFound, "a compare-and-set by the old ID changed the new dead letter")

	// The ID of another event part's dead letter is refused.
	other := deadLetter(name, 4, 0)
	other.ID, other.Generation = fresh.ID, 1
	_, err = s.ParkDeadLetter(ctx, other)
	RequireInvalid(t, err, "dead letter ID", "a compare-and-set on the dead letter of another event")
	other.ID = ulid.Make().String()
	_, err = s.ParkDeadLetter(ctx, other)
	require.ErrorIs(t, err, eventstore.ErrDeadLetterNotFound, "a compare-and-set on an ID no dead letter has")
	all := listDeadLetters(t, s, name)
	require.Len(t, all, 1)
	assert.Equal(t, fresh.ID, all[0].ID)
}

// testDeadLetterKeys: the keys of a consumer's dead letters of events
// within a range of positions, in position order, without payloads, for
// positions whose halves span the whole of uint64 (below 2^63 for the
// major, as every stored event's).
func testDeadLetterKeys(t *testing.T, s storekit.DeadLetterStore) {
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
			require.NoError(t, err)
			out = append(out, k)
		}
		return out
	}
	key := func(i int) storekit.DeadLetterKey { return storekit.KeyOf(parked[i]) }
	end := pos(math.MaxUint64, math.MaxUint64)
	assert.Equal(t, []storekit.DeadLetterKey{key(0), key(1), key(2), key(5), key(3), key(4)}, keys(eventstore.Start, end),
		"every key, by position and part")
	assert.Equal(t, uint64(2), keys(pos(11, 0), pos(12, 0))[0].Generation)
	assert.Equal(t, []storekit.DeadLetterKey{key(1), key(2), key(5)}, keys(pos(5, 0), pos(9, math.MaxUint64)),
		"after the first, through the third: minors count")
	assert.Equal(t, []storekit.DeadLetterKey{key(0)}, keys(pos(4, math.MaxUint64), pos(5, 6)))
	assert.Equal(t, []storekit.DeadLetterKey{key(4)}, keys(pos(12, 0), end))
	assert.Empty(t, keys(pos(12, 0), pos(12, 0)), "an empty range")
	assert.Empty(t, keys(pos(13, 0), pos(12, 0)), "a range that ends before it starts")
	assert.Empty(t, keys(pos(math.MaxInt64, math.MaxUint64), end))
	assert.Empty(t, keys(pos(math.MaxInt64+1, 0), end), "after any stored position")
	for range s.DeadLetterKeys(ctx, name, eventstore.Start, end) {
		break // a caller may stop early
	}
	for _, err := range s.DeadLetterKeys(ctx, "", eventstore.Start, end) {
		require.ErrorIs(t, err, eventstore.ErrInvalidArgument)
	}
}

// testDeadLetterClaims: a dead letter keeps the claim each park gives it
// (a retry's, until a time), to the millisecond, on the first park, on a
// compare-and-set and on an upsert, and a park without one clears it.
func testDeadLetterClaims(t *testing.T, s storekit.DeadLetterStore) {
	ctx, name := context.Background(), consumerName(t, "claims")
	d := deadLetter(name, 3, 0)
	first := mustPark(t, s, d)
	assert.True(t, first.ClaimedUntil.IsZero(), "a dead letter parked without a claim has one: %v", first.ClaimedUntil)
	read := func() eventstore.DeadLetter {
		t.Helper()
		got, err := s.DeadLetter(ctx, name, first.ID)
		require.NoError(t, err)
		return got
	}
	assert.True(t, read().ClaimedUntil.IsZero())

	until := time.Date(2026, 12, 4, 3, 4, 5, 678_000_000, time.UTC)
	claim := read()
	claim.ClaimedUntil = until
	claimed, err := s.ParkDeadLetter(ctx, claim)
	require.NoError(t, err, "claiming by a compare-and-set")
	assert.WithinDuration(t, until, claimed.ClaimedUntil, time.Millisecond)
	got := read()
	assert.WithinDuration(t, until, got.ClaimedUntil, time.Millisecond, "the stored claim")
	assert.Equal(t, claimed.Generation, got.Generation)
	for l, err := range s.DeadLetters(ctx, name) {
		require.NoError(t, err)
		assert.WithinDuration(t, until, l.ClaimedUntil, time.Millisecond, "the listed claim")
	}

	// Renewed by another compare-and-set, then cleared by one.
	got.ClaimedUntil = until.Add(time.Minute)
	_, err = s.ParkDeadLetter(ctx, got)
	require.NoError(t, err)
	assert.WithinDuration(t, until.Add(time.Minute), read().ClaimedUntil, time.Millisecond, "the renewed claim")
	cleared := read()
	cleared.ClaimedUntil = time.Time{}
	_, err = s.ParkDeadLetter(ctx, cleared)
	require.NoError(t, err)
	assert.True(t, read().ClaimedUntil.IsZero(), "a compare-and-set without a claim left one")

	// An upsert (no generation) stores the claim it is given too.
	d.ClaimedUntil = until
	mustPark(t, s, d)
	assert.WithinDuration(t, until, read().ClaimedUntil, time.Millisecond, "the claim an upsert gave")
	d.ClaimedUntil = time.Time{}
	mustPark(t, s, d)
	assert.True(t, read().ClaimedUntil.IsZero(), "an upsert without a claim left one")

	// A new dead letter may be parked claimed.
	other := deadLetter(name, 4, 0)
	other.ClaimedUntil = until
	assert.WithinDuration(t, until, mustPark(t, s, other).ClaimedUntil, time.Millisecond)
}
