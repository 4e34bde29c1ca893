package check_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/check"
)

type point struct {
	X, Y int
	Name string
}

// A failed check stops the case, and its message shows both values and
// where they differ.
func TestFailuresShowWhatDiffers(t *testing.T) {
	after := false
	failures := check.Record(t, func(t testing.TB) {
		check.Equal(t, point{1, 2, "a"}, point{1, 3, "a"}, "point %d", 7)
		after = true
	})
	require.Len(t, failures, 1)
	assert.False(t, after, "a failed check must stop the case")
	for _, want := range []string{"point 7: ", "got:  {X:1 Y:2 Name:a}", "want: {X:1 Y:3 Name:a}", "Y (got 2, want 3)"} {
		assert.Contains(t, failures[0], want)
	}

	failures = check.Record(t, func(t testing.TB) {
		check.Equal(t, []any{point{Name: "a"}}, []any{point{Name: "b"}})
	})
	require.Len(t, failures, 1)
	assert.Contains(t, failures[0], `[0]: Name (got "a", want "b")`)

	failures = check.Record(t, func(t testing.TB) { check.ErrorIs(t, nil, eventstore.ErrClosed, "read") })
	require.Len(t, failures, 1)
	assert.Equal(t, "read: got no error, want one that matches "+eventstore.ErrClosed.Error(), failures[0])

	failures = check.Record(t, func(t testing.TB) { check.NoError(t, errors.New("boom")) })
	require.Len(t, failures, 1)
	assert.True(t, strings.HasPrefix(failures[0], "unexpected error: boom"), failures[0])

	failures = check.Record(t, func(t testing.TB) { check.Len(t, []int{1, 2}, 3, "list") })
	assert.Equal(t, []string{"list: has 2 elements, want 3: [1 2]"}, failures)
}

func TestPassingChecksRecordNothing(t *testing.T) {
	assert.Empty(t, check.Record(t, func(t testing.TB) {
		check.Equal(t, []byte("x"), []byte("x"))
		check.NoError(t, nil)
		check.ErrorIs(t, eventstore.ErrClosed, eventstore.ErrClosed)
		check.True(t, true)
		check.Less(t, 1, 2)
		check.AtMost(t, 2, 2)
		check.Contains(t, "abc", "b")
		check.Len(t, map[int]int{1: 1}, 1)
	}))
}

// Under a TB that is not a *testing.T, Run runs its function inline, and
// a failure in it fails the case.
func TestRunInline(t *testing.T) {
	ran := false
	failures := check.Record(t, func(t testing.TB) {
		check.Run(t, "mode", func(t testing.TB) {
			ran = true
			t.Errorf("bad")
		})
	})
	assert.True(t, ran)
	assert.Equal(t, []string{"bad"}, failures)
}
