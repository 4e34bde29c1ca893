package eventstore_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
)

func TestPositionOrderIsLexicographic(t *testing.T) {
	ordered := []eventstore.Position{
		eventstore.Start,
		{Major: 0, Minor: 1},
		{Major: 1, Minor: 0},
		{Major: 1, Minor: 7},
		{Major: 2, Minor: 0},
		{Major: 1 << 63, Minor: 0},
		{Major: ^uint64(0), Minor: ^uint64(0)},
	}
	for i, p := range ordered {
		for j, q := range ordered {
			assert.Equal(t, compareInts(i, j), p.Compare(q), "%s vs %s", p, q)
			assert.Equal(t, i < j, p.Before(q), "%s before %s", p, q)
		}
	}
	assert.True(t, eventstore.Start.IsZero())
	assert.False(t, eventstore.Position{Minor: 1}.IsZero())
}

func compareInts(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestPositionTextRoundTrip(t *testing.T) {
	for _, p := range []eventstore.Position{{}, {Major: 42}, {Major: 9, Minor: 3}, {Major: ^uint64(0), Minor: ^uint64(0)}} {
		q, err := eventstore.ParsePosition(p.String())
		require.NoError(t, err)
		assert.Equal(t, p, q)

		b, err := json.Marshal(map[string]eventstore.Position{"checkpoint": p})
		require.NoError(t, err)
		var back map[string]eventstore.Position
		require.NoError(t, json.Unmarshal(b, &back))
		assert.Equal(t, p, back["checkpoint"])
	}
	assert.Equal(t, "12:3", eventstore.Position{Major: 12, Minor: 3}.String(), "the text form is stable: checkpoints store it")
}

func TestParsePositionRejectsMalformedText(t *testing.T) {
	for _, s := range []string{"", "12", "12:", ":3", "a:1", "1:b", "-1:0", "1:2:3", "18446744073709551616:0"} {
		_, err := eventstore.ParsePosition(s)
		require.Error(t, err, "%q", s)
		assert.ErrorIs(t, err, eventstore.ErrInvalidArgument, "%q", s)
		assert.Contains(t, err.Error(), s, "the error quotes the text")
	}
}
