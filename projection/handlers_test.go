package projection_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/projection"
	"github.com/cairn-es/cairn/upcast"
)

type (
	cartOpened struct{ Cart string }
	itemAdded  struct {
		Cart string
		Qty  int
	}
	unrelated struct{}
)

func cartRegistry(t *testing.T) *codec.Registry {
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[cartOpened](reg, "cart.opened", 1))
	require.NoError(t, codec.Register[itemAdded](reg, "cart.item_added", 1))
	require.NoError(t, codec.Register[unrelated](reg, "other", 1))
	require.NoError(t, reg.Upcast(upcast.Rename("basket.item_added", 1, "cart.item_added", 1)))
	return reg
}

func TestHandlersCallTheFunctionOfEachType(t *testing.T) {
	reg := cartRegistry(t)
	var h projection.Handlers
	var opened []string
	qty := 0
	require.NoError(t, projection.On(&h, func(_ context.Context, e cartOpened, _ codec.Decoded) error {
		opened = append(opened, e.Cart)
		return nil
	}))
	require.NoError(t, projection.On(&h, func(_ context.Context, e itemAdded, _ codec.Decoded) error {
		qty += e.Qty
		return nil
	}))
	err := projection.On(&h, func(context.Context, itemAdded, codec.Decoded) error { return nil })
	require.ErrorIs(t, err, eventstore.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "handled twice")

	ctx := context.Background()
	for _, v := range []any{cartOpened{Cart: "c1"}, itemAdded{Cart: "c1", Qty: 2}, unrelated{}, itemAdded{Cart: "c1", Qty: 3}} {
		require.NoError(t, h.Handle(ctx, codec.Decoded{Value: v}))
	}
	assert.Equal(t, []string{"c1"}, opened)
	assert.Equal(t, 5, qty, "a value of a type with no function is ignored")

	f, err := h.Filter(reg)
	require.NoError(t, err)
	assert.Equal(t, []string{"basket.item_added", "cart.item_added", "cart.opened"}, f.Types, "stored names, older ones included")

	require.NoError(t, projection.On(&h, func(context.Context, struct{ X int }, codec.Decoded) error { return nil }))
	_, err = h.Filter(reg)
	require.ErrorIs(t, err, eventstore.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "not registered")
}

// A consumer's Filter is the one it reads with, so that a tool counts
// what it has left; changing the copy changes nothing of the consumer's.
func TestConsumerFilterIsTheOneItReadsWith(t *testing.T) {
	ctx := context.Background()
	reg := cartRegistry(t)
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	var h projection.Handlers
	var opened []string
	require.NoError(t, projection.On(&h, func(_ context.Context, e cartOpened, _ codec.Decoded) error {
		opened = append(opened, e.Cart)
		return nil
	}))
	f, err := h.Filter(reg)
	require.NoError(t, err)
	c, err := projection.New("carts", store, reg, store, h.Handle, projection.Options{Filter: f, NoStatsLog: true})
	require.NoError(t, err)
	assert.Equal(t, f, c.Filter())

	got := c.Filter()
	got.Types[0] = "other"
	for i, v := range []any{unrelated{}, cartOpened{Cart: "c1"}} {
		e, err := reg.Encode(v)
		require.NoError(t, err)
		_, err = store.Append(ctx, fmt.Sprintf("s-%d", i), eventstore.Any, e)
		require.NoError(t, err)
	}
	require.NoError(t, c.CatchUp(ctx))
	assert.Equal(t, []string{"c1"}, opened, "the consumer's own filter is untouched")
	assert.Equal(t, []string{"cart.opened"}, c.Filter().Types)

	all, err := projection.New("all", store, reg, store, h.Handle, projection.Options{NoStatsLog: true})
	require.NoError(t, err)
	assert.True(t, all.Filter().IsZero(), "no filter: every event")
}
