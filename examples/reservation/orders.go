package main

import (
	"fmt"
	"math/rand/v2"

	"github.com/cairn-es/cairn/examples/reservation/domain"
)

// order is what a client orders, and whether its customer will authorize
// the payment. Its end follows from these alone (see expect), whatever the
// queue and the crashes do on the way.
type order struct {
	ID          string
	Customer    string
	Seats       int
	AmountCents int64
	Pays        bool
}

// end is how an order ends: "confirmed", or "rejected" and why.
type end struct {
	Status, Reason string
}

func (e end) String() string {
	if e.Reason == "" {
		return e.Status
	}
	return e.Status + " (" + e.Reason + ")"
}

// expect returns how o must end, by the rules of the model.
func expect(o order) end {
	switch {
	case o.Seats > domain.MaxSeats:
		return end{"rejected", domain.ReasonNoSeats}
	case o.AmountCents > domain.CardLimitCents:
		return end{"rejected", domain.ReasonPaymentRefused}
	case !o.Pays:
		return end{"rejected", domain.ReasonNoPayment}
	}
	return end{Status: "confirmed"}
}

var customers = []string{"ada", "alan", "barbara", "claude", "donald", "edsger", "frances", "grace", "john", "ken",
	"leslie", "margaret", "niklaus", "radia", "robin", "shafi", "sophie", "tim", "tony", "whitfield"}

// newOrders makes n orders with IDs starting with prefix. One in ten asks
// for too many seats, one in ten costs more than a card takes, one in ten
// is never paid by its customer, and the others go through.
func newOrders(n int, prefix string, rng *rand.Rand) []order {
	orders := make([]order, n)
	for i := range orders {
		o := order{ID: fmt.Sprintf("%s%04d", prefix, i), Customer: customers[rng.IntN(len(customers))], Pays: true}
		seats, price := 1+rng.IntN(6), int64(35_00+rng.IntN(40_00))
		switch i % 10 {
		case 0:
			seats = domain.MaxSeats + 1 + rng.IntN(4)
		case 3:
			seats, price = 6+rng.IntN(3), int64(110_00+rng.IntN(40_00))
		case 6:
			o.Pays = false
		}
		o.Seats, o.AmountCents = seats, int64(seats)*price
		orders[i] = o
	}
	return orders
}

// events returns how many events o leaves in its order's, its seat
// reservation's and its payment's streams once it has ended: each command
// of its flow took effect once.
func events(o order) (orders, seats, payments int) {
	authorized := 0
	if o.Pays {
		authorized = 1 // kept, unused, when the sale never asks or is refused
	}
	switch want := expect(o); {
	case want.Reason == domain.ReasonNoSeats:
		return 2, 1, authorized
	case want.Reason == domain.ReasonPaymentRefused:
		return 2, 2, authorized
	case want.Reason == domain.ReasonNoPayment:
		return 2, 2, 2 // requested, cancelled
	}
	return 2, 1, 2 // authorized or requested, then accepted
}
