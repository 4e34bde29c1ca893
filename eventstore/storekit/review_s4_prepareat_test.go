package storekit_test

// Review s4: PrepareAppendWith makes its IDs at the caller's reading, or at
// the clock's when that reading is zero.

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

func TestReviewS4PrepareAppendWithZeroAndGivenReadings(t *testing.T) {
	ctx := context.Background()
	events := func() []eventstore.EventData {
		return []eventstore.EventData{{Type: "t", Data: []byte{}}, {Type: "t", Data: []byte{}, ID: uuid.New()}, {Type: "t", Data: []byte{}}}
	}

	// Zero: the clock's reading, as PrepareAppend's.
	before := time.Now().UnixMilli()
	out, err := storekit.PrepareAppendWith(ctx, "s", events(), storekit.PrepareOptions{})
	after := time.Now().UnixMilli()
	require.NoError(t, err)
	for _, i := range []int{0, 2} {
		ms := time.Unix(out[i].ID.Time().UnixTime()).UnixMilli()
		assert.Equal(t, uuid.Version(7), out[i].ID.Version())
		// IDs made in this process run ahead of the clock by at most a
		// few milliseconds here (4,096 a millisecond).
		assert.True(t, ms >= before && ms <= after+5, "event %d: ID of millisecond %d, clock [%d, %d]", i, ms, before, after)
	}
	assert.Less(t, out[0].ID.String(), out[2].ID.String(), "one append's IDs sort in its order")

	// A reading an hour ahead: the IDs hold it; the caller's ID is kept.
	in := events()
	at := time.Now().Add(time.Hour)
	var dst [4]eventstore.EventData
	out, err = storekit.PrepareAppendWith(ctx, "s", in, storekit.PrepareOptions{Into: dst[:0], Now: at})
	require.NoError(t, err)
	assert.Equal(t, at.UnixMilli(), time.Unix(out[0].ID.Time().UnixTime()).UnixMilli())
	assert.Equal(t, in[1].ID, out[1].ID)
	assert.Less(t, out[0].ID.String(), out[2].ID.String())
	assert.Same(t, &dst[0], &out[0], "the copies go into dst")
	assert.Equal(t, uuid.UUID{}, in[0].ID, "the caller's events are not changed")

	// A reading in the past, after that: IDs still after the last one.
	out2, err := storekit.PrepareAppendWith(ctx, "s", events(), storekit.PrepareOptions{Now: time.Now().Add(-time.Hour)})
	require.NoError(t, err)
	assert.Less(t, out[2].ID.String(), out2[0].ID.String())
}
