package domain

import (
	"context"

	"github.com/cairn-es/cairn/aggregate"
)

// MaxSeats is the most seats one order can reserve: more is refused.
const MaxSeats = 8

// MakeReservation asks for an order's seats.
type MakeReservation struct {
	OrderID  string `json:"order_id"`
	Customer string `json:"customer"`
	Seats    int    `json:"seats"`
}

// CancelReservation gives an order's seats back.
type CancelReservation struct {
	OrderID string `json:"order_id"`
}

// AggregateID implements command.Command: a reservation belongs to one
// order.
func (c MakeReservation) AggregateID() string { return c.OrderID }

// AggregateID implements command.Command.
func (c CancelReservation) AggregateID() string { return c.OrderID }

// SeatsReserved records that an order's seats are held for it.
type SeatsReserved struct {
	OrderID  string `json:"order_id"`
	Customer string `json:"customer"`
	Seats    int    `json:"seats"`
}

// SeatsNotReserved records that an order asked for more seats than it may
// have. It names the customer, whom the box office calls back.
type SeatsNotReserved struct {
	OrderID  string `json:"order_id"`
	Customer string `json:"customer"`
	Seats    int    `json:"seats"`
}

// ReservationCancelled records that an order's seats were given back.
type ReservationCancelled struct {
	OrderID string `json:"order_id"`
}

// SeatReservation is the reservation aggregate of one order.
type SeatReservation struct {
	reserved, refused, cancelled bool
}

// reservationBindings bind the reservation's commands and events to its
// methods.
var reservationBindings = []aggregate.Binding[SeatReservation]{
	aggregate.Handles((*SeatReservation).Reserve),
	aggregate.Handles((*SeatReservation).Cancel),
	aggregate.Applies((*SeatReservation).Reserved),
	aggregate.Applies((*SeatReservation).NotReserved),
	aggregate.Applies((*SeatReservation).Cancelled),
}

// Reserve and Cancel decide. A second reservation request, or cancelling
// a reservation that holds nothing, changes nothing.
func (s *SeatReservation) Reserve(_ context.Context, c MakeReservation) ([]any, error) {
	switch {
	case s.reserved || s.refused:
		return nil, nil
	case c.Seats > MaxSeats:
		return []any{SeatsNotReserved(c)}, nil
	}
	return []any{SeatsReserved(c)}, nil
}

func (s *SeatReservation) Cancel(_ context.Context, c CancelReservation) ([]any, error) {
	if !s.reserved || s.cancelled {
		return nil, nil
	}
	return []any{ReservationCancelled(c)}, nil
}

// Reserved, NotReserved and Cancelled evolve.
func (s *SeatReservation) Reserved(SeatsReserved)         { s.reserved = true }
func (s *SeatReservation) NotReserved(SeatsNotReserved)   { s.refused = true }
func (s *SeatReservation) Cancelled(ReservationCancelled) { s.cancelled = true }
