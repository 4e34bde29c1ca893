package aggregate_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/internal/busrepo"
	"github.com/cairn-es/cairn/internal/check"
)

func tallyRepo(t *testing.T, store eventstore.Store, snapshotEvery uint64) *aggregate.Repository[Tally, *Tally] {
	t.Helper()
	repo, err := aggregate.NewRepository(store, newRegistry(t), tallyType(t, snapshotEvery), aggregate.RepositoryOptions{})
	require.NoError(t, err)
	return repo
}

// TestSaveRejectionRecordsOneEventTheAggregateNeverApplies: the recorded
// rejection moves the instance's version and no state, and is found again
// by its command ID, from the instance that saved it, from a replay, and
// from below a snapshot; Tally's Apply refuses unknown events, so a load
// that handed it the rejection would fail.
func TestSaveRejectionRecordsOneEventTheAggregateNeverApplies(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	repo := tallyRepo(t, store, 2)
	inst, err := repo.Load(ctx, "a")
	require.NoError(t, err)
	_, err = repo.Save(ctx, inst, []any{Added{N: 5}}, aggregate.SaveOptions{CommandID: "c0"})
	require.NoError(t, err)

	out, err := busOf(repo).SaveRejection(ctx, inst, busrepo.Rejection{Reason: "too much", Command: "aggregate_test.Add"},
		busrepo.SaveOptions{CommandID: "c1", Metadata: eventstore.Metadata{CorrelationID: "flow"}})
	require.NoError(t, err)
	want := busrepo.Outcome{FirstVersion: 1, LastVersion: 1, Position: eventstore.Position{Major: 2},
		Rejection: &busrepo.Rejection{Reason: "too much", Command: "aggregate_test.Add"}}
	assert.Equal(t, want, out)
	assert.Equal(t, uint64(1), inst.Version, "the instance is at the rejection's version")
	assert.Equal(t, 5, inst.State.Total)
	_, err = repo.Save(ctx, inst, []any{Added{N: 1}}, aggregate.SaveOptions{CommandID: "c2"})
	require.NoError(t, err, "the next save expects the rejection's version")

	var stored eventstore.Event
	for e, err := range store.ReadStream(ctx, "tally-a", eventstore.Forward(1)) {
		require.NoError(t, err)
		stored = e
		break
	}
	assert.True(t, busrepo.IsRejection(&stored))
	assert.Equal(t, "c1", stored.Metadata.CommandID)
	assert.Equal(t, "flow", stored.Metadata.CorrelationID)
	rej, err := busrepo.DecodeRejection(&stored)
	require.NoError(t, err)
	assert.Equal(t, *want.Rejection, rej)

	prior := want
	prior.Duplicate = true
	fresh, err := tallyRepo(t, store, 0).Load(ctx, "a")
	require.NoError(t, err)
	snapped, err := repo.Load(ctx, "a") // from the snapshot taken at the rejection
	require.NoError(t, err)
	for what, in := range map[string]*aggregate.Instance[Tally, *Tally]{"saving instance": inst, "replay": fresh, "snapshot": snapped} {
		assert.Equal(t, 6, in.State.Total, what)
		assert.Equal(t, uint64(2), in.Version, what)
		got, found, err := busOf(repo).PriorOutcome(ctx, in, "c1")
		require.NoError(t, err, what)
		require.True(t, found, "%s finds the recorded rejection", what)
		assert.Equal(t, prior, got, what)
	}
}

// TestARejectionAndASuccessOfOneCommandCannotBothBeStored: a recorded
// rejection takes the ID of the command's first event, and the place the
// loaded version names, so whichever of the two is appended first is the
// command's outcome, and the other's save returns it.
func TestARejectionAndASuccessOfOneCommandCannotBothBeStored(t *testing.T) {
	ctx := context.Background()
	rejection := busrepo.Rejection{Reason: "no", Command: "aggregate_test.Add"}
	t.Run("SuccessFirst", func(t *testing.T) {
		store := memory.New()
		t.Cleanup(func() { _ = store.Close() })
		repo := tallyRepo(t, store, 0)
		winner, err := repo.Load(ctx, "a")
		require.NoError(t, err)
		loser, err := repo.Load(ctx, "a")
		require.NoError(t, err)
		_, err = repo.Save(ctx, winner, []any{Added{N: 1}, Added{N: 2}}, aggregate.SaveOptions{CommandID: "c"})
		require.NoError(t, err)
		out, err := busOf(repo).SaveRejection(ctx, loser, rejection, busrepo.SaveOptions{CommandID: "c"})
		require.NoError(t, err, "the store absorbs the repeat of the first event ID at its place")
		assert.Equal(t, busrepo.Outcome{FirstVersion: 0, LastVersion: 1, Events: []any{Added{N: 1}, Added{N: 2}}, Duplicate: true,
			Position: eventstore.Position{Major: 2}}, out)
		assert.Equal(t, 3, loser.State.Total, "the loser holds the stored state")
	})
	t.Run("RejectionFirst", func(t *testing.T) {
		store := memory.New()
		t.Cleanup(func() { _ = store.Close() })
		repo := tallyRepo(t, store, 0)
		winner, err := repo.Load(ctx, "a")
		require.NoError(t, err)
		loser, err := repo.Load(ctx, "a")
		require.NoError(t, err)
		other, err := repo.Load(ctx, "a")
		require.NoError(t, err)
		user, err := repo.Load(ctx, "a")
		require.NoError(t, err)
		_, err = busOf(repo).SaveRejection(ctx, winner, rejection, busrepo.SaveOptions{CommandID: "c"})
		require.NoError(t, err)
		out, err := busOf(repo).Save(ctx, loser, []any{Added{N: 1}}, busrepo.SaveOptions{CommandID: "c"})
		require.NoError(t, err)
		assert.Equal(t, busrepo.Outcome{Duplicate: true, Rejection: &rejection, Position: eventstore.Position{Major: 1}}, out,
			"the recorded rejection is the outcome")
		assert.Equal(t, 0, loser.State.Total)
		assert.Equal(t, uint64(0), loser.Version, "the loser is at the rejection's version")
		// Outside the bus, Save has no outcome to report: nothing of it
		// was stored, and the rejection's event ID is the conflict.
		_, err = repo.Save(ctx, user, []any{Added{N: 1}}, aggregate.SaveOptions{CommandID: "c"})
		var conflict *eventstore.EventIDConflictError
		require.ErrorAs(t, err, &conflict, "Save meets the bus's recorded rejection of its command ID")
		assert.Equal(t, uint64(0), conflict.StoredVersion)
		assert.Equal(t, 0, user.State.Total)
		_, err = repo.Save(ctx, other, []any{Added{N: 1}, Added{N: 2}}, aggregate.SaveOptions{CommandID: "c"})
		assert.ErrorIs(t, err, eventstore.ErrEventIDConflict, "two events repeat only the first ID: refused, and the bus's reload finds the rejection")
		n := 0
		for _, err := range store.ReadStream(ctx, "tally-a", eventstore.Forward(0)) {
			require.NoError(t, err)
			n++
		}
		assert.Equal(t, 1, n)
	})
}

// TestRejectionInputIsBoundedAndChecked: an enormous or invalid UTF-8
// reason is stored cut and valid, and returned as stored; a rejection
// without a command ID could never be found again and is refused.
func TestRejectionInputIsBoundedAndChecked(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	repo := tallyRepo(t, store, 0)
	inst, err := repo.Load(ctx, "a")
	require.NoError(t, err)

	_, err = busOf(repo).SaveRejection(ctx, inst, busrepo.Rejection{Reason: "no"}, busrepo.SaveOptions{})
	check.Invalid(t, err, "command ID", "a rejection without a command ID")
	_, err = busOf(repo).SaveRejection(ctx, nil, busrepo.Rejection{Reason: "no"}, busrepo.SaveOptions{CommandID: "c"})
	check.Invalid(t, err, "instance", "a nil instance")

	long := "\xff" + strings.Repeat("é", busrepo.MaxRejectionReason)
	out, err := busOf(repo).SaveRejection(ctx, inst, busrepo.Rejection{Reason: long}, busrepo.SaveOptions{CommandID: "c"})
	require.NoError(t, err)
	got := out.Rejection.Reason
	assert.LessOrEqual(t, len(got), busrepo.MaxRejectionReason)
	assert.Greater(t, len(got), busrepo.MaxRejectionReason-4)
	assert.True(t, utf8.ValidString(got))
	assert.True(t, strings.HasPrefix(got, "\uFFFDé"))
	prior, found, err := busOf(repo).PriorOutcome(ctx, inst, "c")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, got, prior.Rejection.Reason, "what is returned is what is stored")
}

// TestDecodeRejectionNamesWhatItCannotRead: another type, a newer or
// older schema version, or data that is not a rejection is a DecodeError
// naming the event.
func TestDecodeRejectionNamesWhatItCannotRead(t *testing.T) {
	ev := func(typ string, version uint32, data string) *eventstore.Event {
		return &eventstore.Event{EventData: eventstore.EventData{Type: typ, SchemaVersion: version, Data: []byte(data)}, StreamID: "tally-a", Version: 7}
	}
	for what, c := range map[string]struct {
		ev   *eventstore.Event
		want error
	}{
		"another type":   {ev("tally.added", 1, `{"n":1}`), codec.ErrUnexpectedType},
		"a newer schema": {ev(busrepo.RejectionType, 2, `{"reason":"x"}`), codec.ErrVersionTooNew},
		"schema 0":       {ev(busrepo.RejectionType, 0, `{"reason":"x"}`), codec.ErrNoUpcastPath},
		"bad data":       {ev(busrepo.RejectionType, 1, `{"reason":`), codec.ErrUndecodable},
	} {
		_, err := busrepo.DecodeRejection(c.ev)
		require.ErrorIs(t, err, c.want, what)
		var de *codec.DecodeError
		require.ErrorAs(t, err, &de, what)
		assert.Equal(t, "tally-a", de.Stream, what)
		assert.Equal(t, uint64(7), de.Version, what)
	}
}
