package kurrentdb_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/storecopy"
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
