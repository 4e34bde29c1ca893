package command_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore/memory"
)

var errSoldOut = errors.New("sold out")

type (
	buyTicket   struct{ Show string }
	ticketsSold struct{}
	box         struct{}
)

func (c buyTicket) AggregateID() string { return c.Show }

func (b *box) buy(_ context.Context, c buyTicket) ([]any, error) {
	return nil, fmt.Errorf("show %s: %w", c.Show, errSoldOut)
}

// TestARecordedRejectionKeepsTheIdentityOfItsError: issue 23, item 3. A
// recorded rejection came back as text, so errors.Is could not match the
// aggregate's sentinel. Promise: with the error registered, the recorded
// rejection matches it, from this bus and from another process's; a bus
// whose codec does not know the code still gives the code and the text.
func TestARecordedRejectionKeepsTheIdentityOfItsError(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	bus := func(known bool) *command.Bus {
		reg := codec.NewRegistry(codec.Options{})
		require.NoError(t, codec.Register[ticketsSold](reg, "box.tickets_sold", 1))
		if known {
			require.NoError(t, codec.RegisterError(reg, "box.sold_out", errSoldOut))
		}
		boxes, err := aggregate.NewType[box]("box", aggregate.Options[box]{}, aggregate.Handles((*box).buy))
		require.NoError(t, err)
		b := command.New(store, reg, command.Options{})
		require.NoError(t, command.Route[buyTicket](b, boxes))
		return b
	}
	msg := command.Message{ID: "m-1", Command: buyTicket{Show: "s-1"}, RecordRejection: true}
	first := bus(true)
	_, err := first.Dispatch(ctx, msg)
	require.ErrorIs(t, err, errSoldOut, "the aggregate's own error")

	for what, b := range map[string]*command.Bus{"the same process": first, "another process": bus(true)} {
		_, err = b.Dispatch(ctx, msg)
		require.ErrorIs(t, err, command.ErrRecordedRejection, what)
		assert.ErrorIs(t, err, errSoldOut, "%s: the recorded rejection matches the registered error", what)
		assert.Equal(t, "show s-1: sold out", err.Error())
	}
	_, err = bus(false).Dispatch(ctx, msg)
	var rec *command.RecordedRejectionError
	require.ErrorAs(t, err, &rec)
	assert.NotErrorIs(t, err, errSoldOut, "a codec that does not know the code cannot match it")
	assert.Equal(t, "box.sold_out", rec.Code)
}
