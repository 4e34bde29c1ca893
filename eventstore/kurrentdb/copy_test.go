package kurrentdb_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/eventstore/storecopy"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// A log copied into KurrentDB and back is the same log, event for event:
// IDs, streams, versions, types, schema versions, data and metadata,
// multi-event appends and Unicode names included; a second run copies
// nothing again.
func TestCopyIntoKurrentDBAndBack(t *testing.T) {
	ctx := context.Background()
	source := memory.New()
	t.Cleanup(func() { _ = source.Close() })
	for i := range 40 {
		stream := fmt.Sprintf("konto-%d-Zürich", i%6)
		e := eventstore.EventData{Type: "booked", SchemaVersion: uint32(1 + i%2), Data: fmt.Appendf(nil, `{"n":%d}`, i),
			Metadata: eventstore.Metadata{CorrelationID: "c", CommandID: fmt.Sprint("cmd-", i), Extra: map[string]string{"k": "v"}}}
		_, err := source.Append(ctx, stream, eventstore.Any, e, ev("noted", fmt.Sprint(i)))
		require.NoError(t, err)
	}
	kdb := open(t, newTestServer(t))
	there, err := storecopy.Copy(ctx, source, kdb, storecopy.Options{})
	require.NoError(t, err)
	assert.Equal(t, int64(80), there.Copied)
	require.NotNil(t, there.Verification)
	assert.Empty(t, there.Verification.Mismatches)

	again, err := storecopy.Copy(ctx, source, kdb, storecopy.Options{})
	require.NoError(t, err)
	assert.Zero(t, again.Copied, "the checkpoint kept in KurrentDB says all is copied")

	back := memory.New()
	t.Cleanup(func() { _ = back.Close() })
	_, err = storecopy.Copy(ctx, kdb, back, storecopy.Options{})
	require.NoError(t, err)
	var want, got []eventstore.Event
	for e, err := range source.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		require.NoError(t, err)
		want = append(want, e)
	}
	for e, err := range back.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		require.NoError(t, err)
		got = append(got, e)
	}
	require.Len(t, got, len(want))
	for i := range want {
		assert.Equal(t, want[i].EventData, got[i].EventData, "event %d", i)
		assert.Equal(t, want[i].StreamID, got[i].StreamID)
		assert.Equal(t, want[i].Version, got[i].Version)
	}
}

// Consumers' state goes from SQLite into KurrentDB and on into memory:
// each checkpoint at each store's position of the same event, dead
// letters with their events' positions there, snapshots; a rerun changes
// nothing.
func TestCopyConsumerStateThroughKurrentDB(t *testing.T) {
	ctx := context.Background()
	source, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "source.db"), sqlite.Options{Synchronous: sqlite.SyncNormal})
	require.NoError(t, err)
	t.Cleanup(func() { _ = source.Close() })
	for i := range 30 {
		_, err := source.Append(ctx, fmt.Sprintf("acct-%d", i%4), eventstore.Any, ev("booked", fmt.Sprintf(`{"n":%d}`, i)))
		require.NoError(t, err)
	}
	var events []eventstore.Event
	for e, err := range source.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		require.NoError(t, err)
		events = append(events, e)
	}
	mid, failed, last := events[11], events[7], events[len(events)-1]
	require.NoError(t, source.SaveCheckpoint(ctx, "ledger", eventstore.Start, mid.Position, 0))
	require.NoError(t, source.SaveCheckpoint(ctx, "audit", eventstore.Start, last.Position, 0))
	parked, err := source.ParkDeadLetter(ctx, eventstore.DeadLetter{Consumer: "ledger", Event: failed, Error: "boom", Attempts: 3,
		FirstFailure: time.Now().UTC(), LastFailure: time.Now().UTC()})
	require.NoError(t, err)
	require.NoError(t, source.SaveSnapshot(ctx, storekit.Snapshot{Stream: "acct-1", Version: 4, Type: "balance", SchemaVersion: 1, Data: []byte(`{"b":5}`)}))

	positionOf := func(s eventstore.Store, id uuid.UUID) eventstore.Position {
		for e, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
			require.NoError(t, err)
			if e.ID == id {
				return e.Position
			}
		}
		require.FailNow(t, "event not found", "%s", id)
		return eventstore.Position{}
	}
	check := func(s eventstore.Store) {
		t.Helper()
		cs := s.(storekit.CheckpointStore)
		for name, e := range map[string]eventstore.Event{"ledger": mid, "audit": last} {
			cp, err := cs.Checkpoint(ctx, name)
			require.NoError(t, err)
			assert.Equal(t, positionOf(s, e.ID), cp.Position, "%T: %s", s, name)
		}
		d, err := s.(storekit.DeadLetterStore).DeadLetter(ctx, "ledger", parked.ID)
		require.NoError(t, err)
		assert.Equal(t, failed.ID, d.Event.ID)
		assert.Equal(t, positionOf(s, failed.ID), d.Event.Position)
		assert.Equal(t, "boom", d.Error)
		assert.Equal(t, 3, d.Attempts)
		snap, ok, err := s.(storekit.SnapshotStore).LoadSnapshot(ctx, "acct-1")
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, `{"b":5}`, string(snap.Data))
	}
	opts := storecopy.Options{Consumers: true, Snapshots: true}

	kdb := open(t, newTestServer(t))
	// Events of its own first, so that no position matches the source's.
	_, err = kdb.Append(ctx, "kdb-only", eventstore.NoStream, ev("noted", `{}`), ev("noted", `{}`), ev("noted", `{}`))
	require.NoError(t, err)
	r, err := storecopy.Copy(ctx, source, kdb, opts)
	require.NoError(t, err)
	assert.Equal(t, int64(2), r.Consumers)
	assert.Equal(t, int64(1), r.DeadLetters)
	assert.Equal(t, int64(1), r.Snapshots)
	check(kdb)
	r, err = storecopy.Copy(ctx, source, kdb, opts)
	require.NoError(t, err)
	assert.Zero(t, r.Copied+r.Consumers+r.DeadLetters+r.Snapshots, "a rerun changes nothing: %+v", r)

	back := memory.New()
	t.Cleanup(func() { _ = back.Close() })
	r, err = storecopy.Copy(ctx, kdb, back, opts)
	require.NoError(t, err)
	assert.Equal(t, int64(2), r.Consumers)
	check(back)
}
