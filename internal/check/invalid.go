package check

import (
	"testing"

	"github.com/cairn-es/cairn/eventstore"
)

// Invalid stops the test unless err is an [*eventstore.InvalidArgumentError]
// whose Field is field and whose message stays short (512 bytes at most)
// whatever the size of the input, and returns it. what says which case
// failed. The bad-input tables of the kits use it, and so do Cairn's own
// tests of the packages built on stores.
func Invalid(t testing.TB, err error, field, what string) *eventstore.InvalidArgumentError {
	t.Helper()
	ErrorIs(t, err, eventstore.ErrInvalidArgument, what)
	var bad *eventstore.InvalidArgumentError
	ErrorAs(t, err, &bad, what)
	Equal(t, bad.Field, field, "%s: %v", what, err)
	AtMost(t, len(err.Error()), 512, "%s: the message quotes a long value in part: %s", what, err)
	return bad
}
