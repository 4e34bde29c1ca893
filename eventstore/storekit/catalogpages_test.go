package storekit

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNameRange(t *testing.T) {
	for _, c := range []struct{ prefix, after, from, to string }{
		{"", "", "", ""},
		{"a", "", "a", "b"},
		{"ab", "a", "ab", "ac"},
		{"a", "ab", "ab", "b"},
		{"a%", "", "a%", "a&"},
		{"a\u007f", "", "a\u007f", "a\u0080"},
		{"a\ud7ff", "", "a\ud7ff", "a\ue000"},
		{"a\U0010FFFF", "", "a\U0010FFFF", "b"},
		{"\U0010FFFF", "", "\U0010FFFF", ""},
		{"a\xe2\x82", "", "a", "b"}, // the start of "a€"
		{"a\x00b", "", "a", "b"},
		{"", "b\xff", "b", ""},
	} {
		from, to := NameRange(c.prefix, c.after)
		assert.Equal(t, c.from, from, "from of %q after %q", c.prefix, c.after)
		assert.Equal(t, c.to, to, "to of %q after %q", c.prefix, c.after)
	}
}

func TestListNames(t *testing.T) {
	names := []string{"a", "a%b", "a_c", "ab", "a€", "a€x", "b", "c"}
	var reads int
	read := func(_ context.Context, from, to string, limit int) ([]string, error) {
		reads++
		var out []string
		for _, n := range names {
			if n >= from && (to == "" || n < to) && len(out) < limit {
				out = append(out, n)
			}
		}
		return out, nil
	}
	list := func(prefix, after string) []string {
		var out []string
		for n, err := range ListNames(context.Background(), prefix, after, func(s string) string { return s }, read, 2) {
			require.NoError(t, err)
			out = append(out, n)
		}
		return out
	}
	assert.Equal(t, names, list("", ""))
	assert.Equal(t, []string{"a", "a%b", "a_c", "ab", "a€", "a€x"}, list("a", ""))
	assert.Equal(t, []string{"a%b"}, list("a%", ""))
	assert.Equal(t, []string{"a€", "a€x"}, list("a\xe2\x82", ""))
	assert.Equal(t, []string{"ab", "a€", "a€x"}, list("a", "a_c"))
	assert.Equal(t, []string{"a€", "a€x", "b", "c"}, list("", "a\xe2\x82"))
	assert.Equal(t, []string{"b", "c"}, list("", "a€\xff"))
	assert.Empty(t, list("a\x00", ""))
	assert.Empty(t, list("z", ""))

	// Breaking stops the reads; a canceled context is its error.
	reads = 0
	for range ListNames(context.Background(), "", "", func(s string) string { return s }, read, 2) {
		break
	}
	assert.Equal(t, 1, reads)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, err := range ListNames(ctx, "", "", func(s string) string { return s }, read, 2) {
		require.ErrorIs(t, err, context.Canceled)
	}
	assert.True(t, slices.IsSorted(names) && !strings.Contains(strings.Join(names, ""), "\x00"))
}
