package command_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/retry"
)

// alwaysBehind is a store on which another writer always appended first:
// every append is a version conflict, as on an aggregate that another
// process keeps winning.
type alwaysBehind struct {
	*memory.Store
	appends int
}

func (s *alwaysBehind) Append(_ context.Context, stream string, expected eventstore.ExpectedVersion, _ ...eventstore.EventData) (eventstore.AppendResult, error) {
	s.appends++
	return eventstore.AppendResult{}, &eventstore.WrongVersionError{Stream: stream, Expected: expected, Actual: eventstore.Exact(uint64(s.appends))}
}

func TestGivingUpSaysItWasContention(t *testing.T) {
	store := &alwaysBehind{Store: memory.New()}
	t.Cleanup(func() { _ = store.Close() })
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[Deposited](reg, "account.deposited", 1))
	require.NoError(t, codec.Register[Withdrawn](reg, "account.withdrawn", 1))
	typ, err := aggregate.NewType[Account]("account", aggregate.Options[Account]{}, accountBindings...)
	require.NoError(t, err)
	b := command.New(store, reg, command.Options{Retry: retry.Policy{Attempts: 3, Initial: time.Microsecond, Max: time.Microsecond}})
	require.NoError(t, command.Route[Deposit](b, typ))

	res, err := b.Dispatch(context.Background(), command.Message{ID: "m-1", Command: Deposit{AccountID: "a1", Amount: 5}})
	require.ErrorIs(t, err, command.ErrContention)
	require.ErrorIs(t, err, eventstore.ErrWrongVersion, "a give-up still matches the version conflict")
	var ce *command.ContentionError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, 3, ce.Attempts)
	assert.Equal(t, "account-a1", ce.Stream)
	assert.Equal(t, "m-1", ce.CommandID)
	var wv *eventstore.WrongVersionError
	require.ErrorAs(t, err, &wv, "the store's last conflict is kept")
	assert.Equal(t, eventstore.Exact(3), wv.Actual)
	assert.Contains(t, err.Error(), "gave up after 3 attempts")
	assert.Equal(t, 3, res.Attempts)
	assert.Equal(t, 3, store.appends, "one append per attempt, then no more")

	b = command.New(store, reg, command.Options{Retry: retry.Policy{Initial: time.Microsecond, Max: time.Microsecond}})
	require.NoError(t, command.Route[Deposit](b, typ))
	store.appends = 0
	_, err = b.Dispatch(context.Background(), command.Message{ID: "m-2", Command: Deposit{AccountID: "a1", Amount: 5}})
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, command.DefaultAttempts, ce.Attempts, "the zero Options try DefaultAttempts times")
}
