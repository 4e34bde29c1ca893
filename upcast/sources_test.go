package upcast_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cairn-es/cairn/upcast"
)

func TestSources(t *testing.T) {
	c := chainOf(t,
		upcast.Rename("order.payment_accepted", 1, "payment.accepted", 1),
		upcast.Rename("payment.accepted", 1, "finance.payment_received", 1),
		upcast.Transform("finance.payment_received", 1, identity),
		upcast.Split("order.placed", 1, oneSplit).Into(
			upcast.Key{Type: "order.placed", Version: 2}, upcast.Key{Type: "order.seats_requested", Version: 1}),
		upcast.Drop("order.noted", 1),
	)
	assert.Equal(t, []string{"finance.payment_received", "order.payment_accepted", "payment.accepted"},
		c.Sources("finance.payment_received"))
	assert.Equal(t, []string{"order.placed", "order.seats_requested"}, c.Sources("order.seats_requested"))
	assert.Equal(t, []string{"order.shipped"}, c.Sources("order.shipped"))

	// An undeclared split may yield anything.
	c = chainOf(t, upcast.Split("legacy.batch", 1, oneSplit))
	assert.Equal(t, []string{"legacy.batch", "order.shipped"}, c.Sources("order.shipped"))
}
