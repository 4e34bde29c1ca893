package main

import (
	"context"
	"errors"
)

// The booking flow's commands, each naming the aggregate it is for.
type (
	PlaceBooking struct {
		BookingID, Room, Card string
		Nights                int
	}
	ConfirmBooking struct{ BookingID string }
	CancelBooking  struct{ BookingID, Reason string }
	HoldRoom       struct{ Room, BookingID string }
	ReleaseRoom    struct{ Room, BookingID string }
	ChargeCard     struct {
		BookingID, Card string
		Amount          int
	}
	VoidCharge struct{ BookingID string }
)

func (c PlaceBooking) AggregateID() string   { return c.BookingID }
func (c ConfirmBooking) AggregateID() string { return c.BookingID }
func (c CancelBooking) AggregateID() string  { return c.BookingID }
func (c HoldRoom) AggregateID() string       { return c.Room }
func (c ReleaseRoom) AggregateID() string    { return c.Room }
func (c ChargeCard) AggregateID() string     { return c.BookingID }
func (c VoidCharge) AggregateID() string     { return c.BookingID }

// The events the aggregates record.
type (
	BookingPlaced struct {
		BookingID string `json:"booking_id"`
		Room      string `json:"room"`
		Card      string `json:"card"`
		Nights    int    `json:"nights"`
	}
	BookingConfirmed struct {
		BookingID string `json:"booking_id"`
	}
	BookingCancelled struct {
		BookingID string `json:"booking_id"`
		Reason    string `json:"reason"`
	}
	RoomHeld struct {
		Room      string `json:"room"`
		BookingID string `json:"booking_id"`
	}
	RoomUnavailable struct {
		Room      string `json:"room"`
		BookingID string `json:"booking_id"`
	}
	RoomReleased struct {
		Room      string `json:"room"`
		BookingID string `json:"booking_id"`
	}
	CardCharged struct {
		BookingID string `json:"booking_id"`
		Amount    int    `json:"amount"`
	}
	ChargeVoided struct {
		BookingID string `json:"booking_id"`
		Refunded  int    `json:"refunded"`
	}
)

// The payment aggregate's refusals: a card declined, and a charge asked
// for after the booking's payment was voided.
var (
	ErrCardDeclined = errors.New("card declined")
	ErrChargeVoided = errors.New("the booking's payment was voided")
)

// Booking is the guest's booking.
type Booking struct{ placed, ended bool }

func (b *Booking) Place(_ context.Context, c PlaceBooking) ([]any, error) {
	if b.placed {
		return nil, nil
	}
	return []any{BookingPlaced(c)}, nil
}

func (b *Booking) Confirm(_ context.Context, c ConfirmBooking) ([]any, error) {
	if b.ended {
		return nil, nil
	}
	return []any{BookingConfirmed(c)}, nil
}

func (b *Booking) Cancel(_ context.Context, c CancelBooking) ([]any, error) {
	if b.ended {
		return nil, nil
	}
	return []any{BookingCancelled(c)}, nil
}

func (b *Booking) Placed(BookingPlaced)       { b.placed = true }
func (b *Booking) Confirmed(BookingConfirmed) { b.ended = true }
func (b *Booking) Cancelled(BookingCancelled) { b.ended = true }

// Room is one hotel room, held by one booking at a time.
type Room struct{ heldBy string }

func (r *Room) Hold(_ context.Context, c HoldRoom) ([]any, error) {
	if r.heldBy != "" && r.heldBy != c.BookingID {
		return []any{RoomUnavailable(c)}, nil // an answer the saga waits for, not an error
	}
	return []any{RoomHeld(c)}, nil
}

func (r *Room) Release(_ context.Context, c ReleaseRoom) ([]any, error) {
	if r.heldBy != c.BookingID {
		return nil, nil
	}
	return []any{RoomReleased(c)}, nil
}

func (r *Room) Held(e RoomHeld)             { r.heldBy = e.BookingID }
func (r *Room) Released(RoomReleased)       { r.heldBy = "" }
func (r *Room) Unavailable(RoomUnavailable) {}

// Payment charges a booking's card, once, and voids the charge when the
// booking is cancelled: a charge made is refunded, and one that comes
// after the void is refused. A card called "declined" is refused; one
// called "3ds" waits for a 3-D Secure check that never comes.
type Payment struct {
	charged int
	voided  bool
}

func (p *Payment) Charge(_ context.Context, c ChargeCard) ([]any, error) {
	switch {
	case p.voided:
		return nil, ErrChargeVoided
	case p.charged > 0 || c.Card == "3ds":
		return nil, nil
	case c.Card == "declined":
		return nil, ErrCardDeclined
	}
	return []any{CardCharged{BookingID: c.BookingID, Amount: c.Amount}}, nil
}

func (p *Payment) Void(_ context.Context, c VoidCharge) ([]any, error) {
	if p.voided {
		return nil, nil
	}
	return []any{ChargeVoided{BookingID: c.BookingID, Refunded: p.charged}}, nil
}

func (p *Payment) Charged(e CardCharged) { p.charged = e.Amount }
func (p *Payment) Voided(ChargeVoided)   { p.voided = true }
