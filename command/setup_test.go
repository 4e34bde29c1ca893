package command_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/upcast"
)

func TestRouteRefusesABrokenRegistry(t *testing.T) {
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[Deposited](reg, "account.deposited", 2))
	require.NoError(t, codec.Register[Withdrawn](reg, "account.withdrawn", 1))
	// Version 1 of "account.withdrawn" becomes "account.debited", which no
	// type is registered as: a chain that ends nowhere.
	require.NoError(t, reg.Upcast(upcast.Rename("account.withdrawn", 1, "account.debited", 1)))
	typ, err := aggregate.NewType[Account]("account", aggregate.Options[Account]{}, accountBindings...)
	require.NoError(t, err)

	b := command.New(store, reg, command.Options{})
	err = command.Route[Deposit](b, typ)
	require.ErrorIs(t, err, codec.ErrInvalidSetup, "a broken registry fails at set-up, not at the first Dispatch")
	assert.Contains(t, err.Error(), `"account"`, "the error names the aggregate type")
	assert.Contains(t, err.Error(), "account.debited", "and what is wrong with the chain")
}
