package clitest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
)

// Case is one golden case: a command line (after --store), and the name
// of its golden file. {P<n>} in an argument stands for the position of
// the fixture's event n (see [Substitute]).
type Case struct {
	Name string
	Args []string
}

// StreamsCases run the streams and events commands on [BuildFixture]'s
// store. None changes it.
var StreamsCases = []Case{
	{"streams-ls", []string{"streams", "ls"}},
	{"streams-ls-prefix", []string{"streams", "ls", "--prefix", "order-"}},
	{"streams-ls-after-limit", []string{"streams", "ls", "--after", "order-1", "--limit", "2"}},
	{"streams-ls-type", []string{"streams", "ls", "--type", "order.paid,seats.reserved"}},
	{"streams-ls-json", []string{"streams", "ls", "--prefix", "seats-", "--json"}},
	{"streams-read", []string{"streams", "read", "order-1"}},
	{"streams-read-data", []string{"streams", "read", "order-1", "--data", "--from", "1"}},
	{"streams-read-backward", []string{"streams", "read", "order-1", "--backward", "--limit", "2"}},
	{"streams-read-type", []string{"streams", "read", "order-1", "--type", "order.confirmed"}},
	{"streams-read-json", []string{"streams", "read", "seats-2", "--json", "--data"}},
	{"streams-read-absent", []string{"streams", "read", "order-404"}},
	{"streams-tail", []string{"streams", "tail", "-n", "3"}},
	{"streams-tail-stream", []string{"streams", "tail", "order-1", "-n", "2", "--data"}},
	{"streams-tail-from-start-prefix", []string{"streams", "tail", "--from-start", "--prefix", "seats-"}},
	{"events-find-correlation", []string{"events", "find", "--correlation", "flow-2", "--data"}},
	{"events-find-command", []string{"events", "find", "--command", "cmd-pay-1", "--json"}},
	{"events-find-type-causation", []string{"events", "find", "--type", "seats.reserved", "--causation", "cmd-place-1"}},
	{"events-find-nothing", []string{"events", "find", "--type", "order.lost"}},
	{"events-find-no-filter", []string{"events", "find"}},
	{"streams-read-bad-from", []string{"streams", "read", "order-1", "--from", "x"}},
	{"streams-tail-bad-after", []string{"streams", "tail", "--after", "nowhere"}},
}

// ConsumerCases run the commands that look at consumers, and those that
// would change them but are refused or not confirmed, on the store of
// [BuildFixture] and [BuildConsumers]: none changes it ([CheckUnchanged]
// says so).
var ConsumerCases = []Case{
	{"projections-ls", []string{"projections", "ls"}},
	{"projections-ls-json", []string{"projections", "ls", "--json"}},
	{"projections-status", []string{"projections", "status", "seats-view"}},
	{"projections-status-leased", []string{"projections", "status", "orders-view"}},
	{"projections-status-json", []string{"projections", "status", "stalled", "--json"}},
	{"projections-status-unknown", []string{"projections", "status", "nobody"}},
	{"projections-reset-leased", []string{"projections", "reset", "orders-view", "--to-start", "--yes"}},
	{"projections-reset-unknown", []string{"projections", "reset", "nobody", "--to-start", "--yes"}},
	{"projections-reset-no-target", []string{"projections", "reset", "stalled"}},
	{"projections-reset-both-targets", []string{"projections", "reset", "stalled", "--to-start", "--after", "{P3}"}},
	{"projections-reset-bad-position", []string{"projections", "reset", "stalled", "--after", "nowhere"}},
	{"projections-reset-past-head", []string{"projections", "reset", "stalled", "--after", "999999999:0"}},
	{"projections-reset-not-confirmed", []string{"projections", "reset", "stalled", "--after", "{P3}"}},
	{"projections-rebuild-bare", []string{"projections", "rebuild", "orders-view", "--yes"}},
	{"deadletters-ls", []string{"deadletters", "ls"}},
	{"deadletters-ls-consumer", []string{"deadletters", "ls", "--consumer", "seats-view"}},
	{"deadletters-ls-json", []string{"deadletters", "ls", "--consumer", "saga:sale", "--json"}},
	{"deadletters-ls-none", []string{"deadletters", "ls", "--consumer", "orders-view"}},
	{"deadletters-ls-unknown", []string{"deadletters", "ls", "--consumer", "nobody"}},
	{"deadletters-show", []string{"deadletters", "show", SeatsDL1, "--consumer", "seats-view"}},
	{"deadletters-show-binary", []string{"deadletters", "show", SeatsDL2, "--consumer", "seats-view", "--json"}},
	{"deadletters-show-missing", []string{"deadletters", "show", Missing, "--consumer", "seats-view"}},
	{"deadletters-show-no-consumer", []string{"deadletters", "show", SeatsDL1}},
	{"deadletters-skip-not-confirmed", []string{"deadletters", "skip", SeatsDL1, "--consumer", "seats-view"}},
	{"deadletters-skip-missing", []string{"deadletters", "skip", Missing, "--consumer", "seats-view", "--yes"}},
	{"deadletters-retry-bare", []string{"deadletters", "retry", SagaDL, "--consumer", "saga:sale", "--yes"}},
	{"doctor", []string{"doctor"}},
	{"doctor-json", []string{"doctor", "--json"}},
	{"doctor-max-lag", []string{"doctor", "--max-lag", "1"}},
}

// CheckUnchanged checks, through the store, that the consumer fixture
// is as [BuildConsumers] left it: what ConsumerCases refuse or are not
// confirmed moves nothing.
func CheckUnchanged(t testing.TB, s ConsumerStores, stored []eventstore.Event) {
	t.Helper()
	ctx := context.Background()
	cp, err := s.Checkpoint(ctx, "stalled")
	require.NoError(t, err)
	assert.Equal(t, stored[1].Position, cp.Position, "a reset not confirmed moves nothing")
	cp, err = s.Checkpoint(ctx, "orders-view")
	require.NoError(t, err)
	assert.Equal(t, stored[5].Position, cp.Position, "a leased consumer's reset is refused")
	n, err := s.CountDeadLetters(ctx, "seats-view")
	require.NoError(t, err)
	assert.Equal(t, 2, n, "a skip not confirmed deletes nothing")
}

// ConsumerChanges make changes, with --yes, on a fresh consumer fixture,
// one after the other in this order; each exits 0, and [CheckChanges]
// checks them through the store.
var ConsumerChanges = []Case{
	{"projections-reset-after", []string{"projections", "reset", "stalled", "--after", "{P3}", "--yes"}},
	{"projections-reset-to-start", []string{"projections", "reset", "seats-view", "--to-start", "--yes", "--json"}},
	{"deadletters-skip", []string{"deadletters", "skip", SeatsDL1, "--consumer", "seats-view", "--yes"}},
}

// CheckChanges checks, through the store, what ConsumerChanges did.
func CheckChanges(t testing.TB, s ConsumerStores, stored []eventstore.Event) {
	t.Helper()
	ctx := context.Background()
	cp, err := s.Checkpoint(ctx, "stalled")
	require.NoError(t, err)
	assert.Equal(t, stored[3].Position, cp.Position)
	cp, err = s.Checkpoint(ctx, "seats-view")
	require.NoError(t, err)
	assert.Equal(t, eventstore.Start, cp.Position)
	_, err = s.DeadLetter(ctx, "seats-view", SeatsDL1)
	require.ErrorIs(t, err, eventstore.ErrDeadLetterNotFound, "skipped")
	_, err = s.DeadLetter(ctx, "seats-view", SeatsDL2)
	require.NoError(t, err, "the other dead letter stays")
}

// SagasBareCases run the sagas commands of the bare binary (no saga
// mounted) on [NewLedger]'s store, before any saga action: none changes
// it.
var SagasBareCases = []Case{
	{"sagas-ls-bare", []string{"sagas", "ls"}},
	{"sagas-ls-type-page", []string{"sagas", "ls", "ledger", "--after", "a", "--limit", "2"}},
	{"sagas-explain-bare", []string{"sagas", "explain", "ledger", "a"}},
	{"sagas-doctor-bare", []string{"doctor"}},
}
