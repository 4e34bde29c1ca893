package failpoint_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/internal/failpoint"
)

func TestParse(t *testing.T) {
	for value, want := range map[string]failpoint.Spec{
		"":                      {},
		"bus.after-append":      {Name: failpoint.BusAfterAppend, Hit: 1},
		"deadline.after-fire@7": {Name: failpoint.DeadlineAfterFire, Hit: 7},
	} {
		got, err := failpoint.Parse(value)
		require.NoError(t, err, value)
		assert.Equal(t, want, got, value)
	}
	for _, value := range []string{"bus.after", "bus.after-append@0", "bus.after-append@x", "bus.after-append@-1", "@3"} {
		_, err := failpoint.Parse(value)
		var se *failpoint.SpecError
		require.ErrorAs(t, err, &se, value)
		assert.ErrorIs(t, err, failpoint.ErrSpec)
		assert.Equal(t, value, se.Value)
		assert.Contains(t, err.Error(), failpoint.Env)
	}
}

func TestNames(t *testing.T) {
	seen := make(map[string]bool)
	for _, name := range failpoint.Names() {
		assert.False(t, seen[name], "%s listed twice", name)
		seen[name] = true
		s, err := failpoint.Parse(name)
		require.NoError(t, err)
		assert.Equal(t, name+"@1", s.String())
	}
	assert.Len(t, seen, 9)
}

// TestOff checks the build without the tag: Hit does nothing, and an armed
// failpoint is an error, so that a crash test cannot wait for a crash that
// this build never makes.
func TestOff(t *testing.T) {
	if failpoint.Enabled {
		t.Skip("built with -tags " + failpoint.Tag + ": TestKill covers this build")
	}
	t.Setenv(failpoint.Env, failpoint.BusAfterDecide)
	failpoint.Hit(failpoint.BusAfterDecide)
	assert.Zero(t, failpoint.Hits(failpoint.BusAfterDecide))
	_, err := failpoint.Armed()
	require.True(t, errors.Is(err, failpoint.ErrSpec), "Armed: %v", err)
	assert.True(t, strings.Contains(err.Error(), failpoint.Tag), err.Error())
}
