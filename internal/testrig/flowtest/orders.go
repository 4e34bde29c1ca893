// Package flowtest runs the reservation flow (internal/testrig/reservation) the way
// Cairn's crash and deployment tests need it: orders placed through the
// bus as a queue consumer would, the Sale saga and a transactional read
// model running beside them, in this process or in a child process that
// is killed; and it checks what they left in the store, order by order,
// counting Jepsen's way (acknowledged, applied, lost, duplicated,
// unexpected).
package flowtest

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/cairn-es/cairn/examples/reservation/domain"
	"github.com/cairn-es/cairn/internal/testrig/reservation"
)

// Order is one order the flow places: its ID and the inputs that decide
// how it ends (see reservation.Expect).
type Order struct {
	ID          string
	Seats       int
	AmountCents int64
}

// Fixed returns n orders whose inputs follow i (seats 1 + i%12, amount
// 100 + 97i): every way an order can end, the same in every run.
func Fixed(n int) []Order {
	orders := make([]Order, n)
	for i := range orders {
		orders[i] = Order{ID: fmt.Sprintf("o%03d", i), Seats: 1 + i%12, AmountCents: 100 + 97*int64(i)}
	}
	return orders
}

// The four ways an order ends.
const (
	endConfirmed = iota // seats and payment accepted
	endNoSeats          // more seats than a reservation gets
	endRefused          // payment refused: the reservation is cancelled
	endDeadline         // payment never completes: the deadline rejects it
	ends
)

// Seeded returns n orders drawn from seed: each ends in one of the four
// ways at random, and the first four (or n, if fewer) end in four
// different ways, so that every path of the flow runs.
func Seeded(seed uint64, n int) []Order {
	rng := rand.New(rand.NewPCG(seed, 0x6361697226))
	first := rng.Perm(ends)
	orders := make([]Order, n)
	for i := range orders {
		end := rng.IntN(ends)
		if i < ends {
			end = first[i]
		}
		o := Order{ID: fmt.Sprintf("o%03d", i), Seats: 1 + rng.IntN(domain.MaxSeats)}
		switch end {
		case endConfirmed:
			o.AmountCents = 1 + rng.Int64N(reservation.MaxAmountCents)
			if o.AmountCents%7 == 0 {
				o.AmountCents++ // 1000 is not a multiple of 7, so this stays in range
			}
		case endNoSeats:
			o.Seats = domain.MaxSeats + 1 + rng.IntN(5)
			o.AmountCents = 1 + rng.Int64N(2*reservation.MaxAmountCents)
		case endRefused:
			o.AmountCents = reservation.MaxAmountCents + 1 + rng.Int64N(reservation.MaxAmountCents)
		case endDeadline:
			o.AmountCents = 7 * (1 + rng.Int64N(reservation.MaxAmountCents/7))
		}
		orders[i] = o
	}
	return orders
}

// Deadlines returns how many of orders end by their payment deadline.
func Deadlines(orders []Order) int {
	n := 0
	for _, o := range orders {
		if reservation.Expect(o.Seats, o.AmountCents).AfterDeadline {
			n++
		}
	}
	return n
}

// encodeOrders writes orders as "id:seats:amount,..." for a child's
// environment.
func encodeOrders(orders []Order) string {
	parts := make([]string, len(orders))
	for i, o := range orders {
		parts[i] = fmt.Sprintf("%s:%d:%d", o.ID, o.Seats, o.AmountCents)
	}
	return strings.Join(parts, ",")
}

// decodeOrders reads what encodeOrders wrote.
func decodeOrders(s string) ([]Order, error) {
	if s == "" {
		return nil, nil
	}
	var orders []Order
	for i, part := range strings.Split(s, ",") {
		f := strings.Split(part, ":")
		if len(f) != 3 {
			return nil, fmt.Errorf("flowtest: order %d %q is not id:seats:amount", i, part)
		}
		seats, err1 := strconv.Atoi(f[1])
		amount, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("flowtest: order %d %q: seats and amount must be numbers", i, part)
		}
		orders = append(orders, Order{ID: f[0], Seats: seats, AmountCents: amount})
	}
	return orders, nil
}
