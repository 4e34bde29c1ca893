package main

import (
	"context"
	"errors"
	"time"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/saga"
)

// Stay is the saga's state: what one booking's flow remembers between
// its steps.
type Stay struct {
	BookingID string `json:"booking_id"`
	Room      string `json:"room"`
	Card      string `json:"card"`
	Nights    int    `json:"nights"`
	Held      bool   `json:"held"`
}

// HoldExpired is the payload of the "hold" deadline.
type HoldExpired struct {
	Room string `json:"room"`
}

// register names every type that is stored: the events, the commands
// (a saga records the commands it sends), the saga's state and its
// deadline payloads.
func register(reg *codec.Registry) error {
	return errors.Join(
		codec.Register[BookingPlaced](reg, "booking.placed", 1),
		codec.Register[BookingConfirmed](reg, "booking.confirmed", 1),
		codec.Register[BookingCancelled](reg, "booking.cancelled", 1),
		codec.Register[RoomHeld](reg, "room.held", 1),
		codec.Register[RoomUnavailable](reg, "room.unavailable", 1),
		codec.Register[RoomReleased](reg, "room.released", 1),
		codec.Register[CardCharged](reg, "payment.card_charged", 1),
		codec.Register[PlaceBooking](reg, "booking.place", 1),
		codec.Register[ConfirmBooking](reg, "booking.confirm", 1),
		codec.Register[CancelBooking](reg, "booking.cancel", 1),
		codec.Register[HoldRoom](reg, "room.hold", 1),
		codec.Register[ReleaseRoom](reg, "room.release", 1),
		codec.Register[ChargeCard](reg, "payment.charge_card", 1),
		codec.Register[VoidCharge](reg, "payment.void_charge", 1),
		codec.Register[ChargeVoided](reg, "payment.charge_voided", 1),
		codec.Register[Stay](reg, "stay.state", 1),
		codec.Register[HoldExpired](reg, "stay.hold_expired", 1),
		// A refusal's code, so that a recorded rejection still matches it.
		codec.RegisterError(reg, "payment.card_declined", ErrCardDeclined),
	)
}

// holdFor is how long a room stays held for a payment.
const holdFor = 15 * time.Minute

// stays declares the saga: the events it reacts to, the deadline it sets
// and the commands it sends. Every set-up call returns an error; check
// them all.
func stays(reg *codec.Registry) (*saga.Type[Stay], error) {
	stay, err := saga.New[Stay]("stay", reg, saga.Options[Stay]{})
	if err != nil {
		return nil, err
	}
	err = errors.Join(
		saga.Sends[Stay, HoldRoom](stay),
		saga.Sends[Stay, ReleaseRoom](stay),
		saga.Sends[Stay, ConfirmBooking](stay),
		saga.Sends[Stay, CancelBooking](stay),
		saga.Sends[Stay, VoidCharge](stay),

		// A placed booking starts an instance, named by the booking's ID.
		saga.On(stay, saga.Event[Stay, BookingPlaced]{
			Instance: func(e BookingPlaced, _ eventstore.Metadata) string { return e.BookingID },
			Starts:   true,
			Handle: func(_ context.Context, s *Stay, e BookingPlaced, out *saga.Output) error {
				*s = Stay{BookingID: e.BookingID, Room: e.Room, Card: e.Card, Nights: e.Nights}
				out.Send(HoldRoom{Room: e.Room, BookingID: e.BookingID})
				return nil
			},
		}),

		// The room is held: charge the card, and give the payment 15
		// minutes.
		saga.On(stay, saga.Event[Stay, RoomHeld]{
			Instance: func(e RoomHeld, _ eventstore.Metadata) string { return e.BookingID },
			Handle: func(_ context.Context, s *Stay, e RoomHeld, out *saga.Output) error {
				s.Held = true
				out.Send(ChargeCard{BookingID: s.BookingID, Card: s.Card, Amount: 120 * s.Nights})
				out.ScheduleAfter("hold", holdFor, HoldExpired{Room: s.Room})
				return nil
			},
		}),

		// Another booking has the room: a business answer, as an event.
		saga.On(stay, saga.Event[Stay, RoomUnavailable]{
			Instance: func(e RoomUnavailable, _ eventstore.Metadata) string { return e.BookingID },
			Handle: func(_ context.Context, s *Stay, _ RoomUnavailable, out *saga.Output) error {
				out.Send(CancelBooking{BookingID: s.BookingID, Reason: "room unavailable"})
				out.Complete()
				return nil
			},
		}),

		// Paid: the hold's deadline is no longer needed.
		saga.On(stay, saga.Event[Stay, CardCharged]{
			Instance: func(e CardCharged, _ eventstore.Metadata) string { return e.BookingID },
			Handle: func(_ context.Context, s *Stay, _ CardCharged, out *saga.Output) error {
				out.Cancel("hold")
				out.Send(ConfirmBooking{BookingID: s.BookingID})
				out.Complete()
				return nil
			},
		}),

		// The payment refused the card: compensate. The reason matches
		// the payment's own error, as the codec registered its code.
		saga.OnRejected(stay, func(_ context.Context, s *Stay, _ ChargeCard, reason error, out *saga.Output) error {
			if errors.Is(reason, ErrCardDeclined) {
				s.cancel(out, "card declined")
				return nil
			}
			s.cancel(out, "payment refused: "+reason.Error())
			return nil
		}),

		// No payment in time: compensate too.
		saga.OnDeadline(stay, "hold", func(_ context.Context, s *Stay, _ HoldExpired, out *saga.Output) error {
			s.cancel(out, "not paid in time")
			return nil
		}),
	)
	return stay, err
}

// cancel releases the room the stay holds, voids its charge (refunded if
// it was made, refused if it comes later) and cancels the booking.
func (s *Stay) cancel(out *saga.Output, reason string) {
	if s.Held {
		out.Send(ReleaseRoom{Room: s.Room, BookingID: s.BookingID})
		out.Send(VoidCharge{BookingID: s.BookingID})
	}
	out.Cancel("hold")
	out.Send(CancelBooking{BookingID: s.BookingID, Reason: reason})
	out.Complete()
}
