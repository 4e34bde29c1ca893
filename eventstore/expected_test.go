package eventstore_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

func TestExpectedVersionMatches(t *testing.T) {
	type state struct {
		last   uint64
		exists bool
	}
	absent, atZero, atFive := state{}, state{0, true}, state{5, true}
	cases := []struct {
		expected eventstore.ExpectedVersion
		matches  []state
		refuses  []state
	}{
		{eventstore.Any, []state{absent, atZero, atFive}, nil},
		{eventstore.NoStream, []state{absent}, []state{atZero, atFive}},
		{eventstore.StreamExists, []state{atZero, atFive}, []state{absent}},
		{eventstore.Exact(0), []state{atZero}, []state{absent, atFive}},
		{eventstore.Exact(5), []state{atFive}, []state{absent, atZero}},
	}
	for _, c := range cases {
		for _, s := range c.matches {
			assert.True(t, c.expected.Matches(s.last, s.exists), "%s should match %+v", c.expected, s)
		}
		for _, s := range c.refuses {
			assert.False(t, c.expected.Matches(s.last, s.exists), "%s should refuse %+v", c.expected, s)
		}
	}
}

func TestExpectedVersionDescribesItself(t *testing.T) {
	var zero eventstore.ExpectedVersion
	assert.Equal(t, eventstore.Any, zero, "the zero value is Any")
	assert.Equal(t, "any", eventstore.Any.String())
	assert.Equal(t, "no stream", eventstore.NoStream.String())
	assert.Equal(t, "stream exists", eventstore.StreamExists.String())
	assert.Equal(t, "17", eventstore.Exact(17).String())
	v, ok := eventstore.Exact(17).Version()
	assert.Equal(t, uint64(17), v)
	assert.True(t, ok)
	_, ok = eventstore.StreamExists.Version()
	assert.False(t, ok)
	assert.Equal(t, eventstore.NoStream, storekit.StreamState(0, false))
	assert.Equal(t, eventstore.Exact(3), storekit.StreamState(3, true))
}
