package saga_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/saga"
	"github.com/cairn-es/cairn/saga/sagatest"
)

// The example's two aggregates: a booking, and the hotel whose rooms it
// holds. Neither handles the other's events; the stay saga connects them.
type (
	// Booking is requested, then confirmed or declined.
	Booking struct{ Status string }
	// Hotel counts its free rooms.
	Hotel struct{ Free int }
)

// Commands name the aggregate they are for.
type (
	RequestBooking struct {
		BookingID, HotelID string
		Rooms              int
	}
	ConfirmBooking struct{ BookingID string }
	DeclineBooking struct {
		BookingID, Reason string
	}
	AddRooms struct {
		HotelID string
		Rooms   int
	}
	HoldRooms struct {
		HotelID, BookingID string
		Rooms              int
	}
)

func (c RequestBooking) AggregateID() string { return c.BookingID }
func (c ConfirmBooking) AggregateID() string { return c.BookingID }
func (c DeclineBooking) AggregateID() string { return c.BookingID }
func (c AddRooms) AggregateID() string       { return c.HotelID }
func (c HoldRooms) AggregateID() string      { return c.HotelID }

// Events, registered with the codec under stable names.
type (
	BookingRequested struct {
		BookingID, HotelID string
		Rooms              int
	}
	BookingConfirmed struct{ BookingID string }
	BookingDeclined  struct{ BookingID, Reason string }
	RoomsAdded       struct{ Rooms int }
	RoomsHeld        struct {
		BookingID string
		Rooms     int
	}
)

var errFullyBooked = errors.New("fully booked")

// Request, Confirm and Decline decide a booking's commands.
func (o *Booking) Request(_ context.Context, c RequestBooking) ([]any, error) {
	return []any{BookingRequested(c)}, nil
}

func (o *Booking) Confirm(_ context.Context, c ConfirmBooking) ([]any, error) {
	return []any{BookingConfirmed(c)}, nil
}

func (o *Booking) Decline(_ context.Context, c DeclineBooking) ([]any, error) {
	return []any{BookingDeclined(c)}, nil
}

// Requested, Confirmed and Declined apply a booking's events.
func (o *Booking) Requested(BookingRequested) { o.Status = "placed" }
func (o *Booking) Confirmed(BookingConfirmed) { o.Status = "confirmed" }
func (o *Booking) Declined(BookingDeclined)   { o.Status = "cancelled" }

// Add and Hold decide a hotel's commands.
func (s *Hotel) Add(_ context.Context, c AddRooms) ([]any, error) {
	return []any{RoomsAdded{Rooms: c.Rooms}}, nil
}

func (s *Hotel) Hold(_ context.Context, c HoldRooms) ([]any, error) {
	if c.Rooms > s.Free {
		return nil, errFullyBooked
	}
	return []any{RoomsHeld{BookingID: c.BookingID, Rooms: c.Rooms}}, nil
}

// Added and Held apply a hotel's events.
func (s *Hotel) Added(e RoomsAdded) { s.Free += e.Rooms }
func (s *Hotel) Held(e RoomsHeld)   { s.Free -= e.Rooms }

// Stay is the saga's state: one instance per booking.
type Stay struct {
	BookingID string
	Rooms     int
}

// hotelDue is the payload of the deadline that gives up on the hotel.
type hotelDue struct{ BookingID string }

// hotels wires the example: the codec, the bus with its routes, and the
// stay saga's declaration.
func hotels(store eventstore.Store) (*command.Bus, *saga.Type[Stay], error) {
	reg := codec.NewRegistry(codec.Options{})
	err := errors.Join(
		codec.Register[RequestBooking](reg, "hotel.request-booking", 1),
		codec.Register[ConfirmBooking](reg, "hotel.confirm-booking", 1),
		codec.Register[DeclineBooking](reg, "hotel.decline-booking", 1),
		codec.Register[HoldRooms](reg, "hotel.hold-rooms", 1),
		codec.Register[BookingRequested](reg, "hotel.booking-requested", 1),
		codec.Register[BookingConfirmed](reg, "hotel.booking-confirmed", 1),
		codec.Register[BookingDeclined](reg, "hotel.booking-declined", 1),
		codec.Register[RoomsAdded](reg, "hotel.rooms-added", 1),
		codec.Register[RoomsHeld](reg, "hotel.rooms-held", 1),
		codec.Register[Stay](reg, "hotel.stay", 1), // the saga's state
		codec.Register[hotelDue](reg, "hotel.hotel-due", 1),
	)
	if err != nil {
		return nil, nil, err
	}
	bookings, err := aggregate.NewType[Booking]("booking", aggregate.Options[Booking]{},
		aggregate.Handles((*Booking).Request), aggregate.Handles((*Booking).Confirm), aggregate.Handles((*Booking).Decline),
		aggregate.Applies((*Booking).Requested), aggregate.Applies((*Booking).Confirmed), aggregate.Applies((*Booking).Declined))
	if err != nil {
		return nil, nil, err
	}
	hotel, err := aggregate.NewType[Hotel]("hotel", aggregate.Options[Hotel]{},
		aggregate.Handles((*Hotel).Add), aggregate.Handles((*Hotel).Hold),
		aggregate.Applies((*Hotel).Added), aggregate.Applies((*Hotel).Held))
	if err != nil {
		return nil, nil, err
	}
	bus := command.New(store, reg, command.Options{})
	err = errors.Join(
		command.Route[RequestBooking](bus, bookings),
		command.Route[ConfirmBooking](bus, bookings),
		command.Route[DeclineBooking](bus, bookings),
		command.Route[AddRooms](bus, hotel),
		command.Route[HoldRooms](bus, hotel),
	)
	if err != nil {
		return nil, nil, err
	}

	stay, err := saga.New("stay", reg, saga.Options[Stay]{})
	if err != nil {
		return nil, nil, err
	}
	err = errors.Join(
		saga.Sends[Stay, ConfirmBooking](stay),
		saga.Sends[Stay, DeclineBooking](stay),
		// A booking requested starts an instance, which asks the hotel to
		// hold the rooms and gives it an hour.
		saga.On(stay, saga.Event[Stay, BookingRequested]{
			Instance: func(e BookingRequested, _ eventstore.Metadata) string { return e.BookingID },
			Starts:   true,
			Handle: func(_ context.Context, s *Stay, e BookingRequested, out *saga.Output) error {
				s.BookingID, s.Rooms = e.BookingID, e.Rooms
				out.Send(HoldRooms{HotelID: e.HotelID, BookingID: e.BookingID, Rooms: e.Rooms})
				out.ScheduleAfter("hotel", time.Hour, hotelDue{BookingID: e.BookingID})
				return nil
			},
		}),
		// The rooms held (an event of the hotel's stream) confirm the booking.
		saga.On(stay, saga.Event[Stay, RoomsHeld]{
			Instance: func(e RoomsHeld, _ eventstore.Metadata) string { return e.BookingID },
			Handle: func(_ context.Context, s *Stay, e RoomsHeld, out *saga.Output) error {
				out.Cancel("hotel")
				out.Send(ConfirmBooking{BookingID: s.BookingID})
				out.Complete()
				return nil
			},
		}),
		// The hotel refused: compensate by declining the booking.
		saga.OnRejected(stay, func(_ context.Context, s *Stay, c HoldRooms, reason error, out *saga.Output) error {
			out.Cancel("hotel")
			out.Send(DeclineBooking{BookingID: s.BookingID, Reason: reason.Error()})
			out.Complete()
			return nil
		}),
		saga.OnDeadline(stay, "hotel", func(_ context.Context, s *Stay, p hotelDue, out *saga.Output) error {
			out.Send(DeclineBooking{BookingID: p.BookingID, Reason: "no answer from the hotel"})
			out.Complete()
			return nil
		}),
	)
	return bus, stay, err
}

// A stay saga between bookings and a hotel: two bookings fit the hotel's
// five rooms and are confirmed; the third asks for more than it has and is
// declined by the saga's compensation. A runner in a service calls Run;
// here CatchUp handles everything stored, and everything that causes, then
// returns.
func Example() {
	ctx := context.Background()
	store := memory.New()
	defer store.Close()
	bus, stay, err := hotels(store)
	if err != nil {
		panic(err)
	}
	// The store keeps the runner's checkpoints beside the events.
	runner, err := saga.NewRunner(stay, store, bus, saga.RunnerOptions{})
	if err != nil {
		panic(err)
	}

	dispatch := func(id string, cmd command.Command) {
		if _, err := bus.Dispatch(ctx, command.Message{ID: id, Command: cmd}); err != nil {
			panic(err)
		}
	}
	dispatch("rooms-1", AddRooms{HotelID: "lakeside", Rooms: 5})
	dispatch("booking-a", RequestBooking{BookingID: "a", HotelID: "lakeside", Rooms: 2})
	dispatch("booking-b", RequestBooking{BookingID: "b", HotelID: "lakeside", Rooms: 3})
	dispatch("booking-c", RequestBooking{BookingID: "c", HotelID: "lakeside", Rooms: 6})
	if err := runner.CatchUp(ctx); err != nil {
		panic(err)
	}

	for _, id := range []string{"a", "b", "c"} {
		for ev, err := range store.ReadStream(ctx, "booking-"+id, eventstore.ReadOptions{}) {
			if err != nil {
				panic(err)
			}
			fmt.Printf("%s: %s\n", ev.StreamID, ev.Type)
		}
	}
	// Output:
	// booking-a: hotel.booking-requested
	// booking-a: hotel.booking-confirmed
	// booking-b: hotel.booking-requested
	// booking-b: hotel.booking-confirmed
	// booking-c: hotel.booking-requested
	// booking-c: hotel.booking-declined
}

// Events from outside the store (a broker's, with its own sequence) reach
// a saga through Deliver; the same message delivered twice, as a broker
// redelivers it, is a duplicate. A deadline fires when nothing cancels it
// first: here no outbox runs (no Run or CatchUp), so the hotel never
// answers, and an hour later on the runner's clock the instance cancels
// the booking.
func ExampleRunner_Deliver() {
	ctx := context.Background()
	store := memory.New()
	defer store.Close()
	bus, stay, err := hotels(store)
	if err != nil {
		panic(err)
	}
	clock := sagatest.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	runner, err := saga.NewRunner(stay, store, bus, saga.RunnerOptions{Clock: clock})
	if err != nil {
		panic(err)
	}

	placed := BookingRequested{BookingID: "d", HotelID: "hilltop", Rooms: 1}
	for range 2 {
		out, err := runner.Deliver(ctx, saga.Delivery{Source: "broker/bookings", Sequence: 0, Event: placed})
		if err != nil {
			panic(err)
		}
		fmt.Println(out)
	}
	x, err := runner.Explain(ctx, "d")
	if err != nil {
		panic(err)
	}
	for _, d := range x.Deadlines {
		fmt.Printf("deadline %s at %s\n", d.Name, d.At.Format(time.Kitchen))
	}

	clock.Advance(time.Hour)
	if _, err := runner.FireDue(ctx); err != nil {
		panic(err)
	}
	x, err = runner.Explain(ctx, "d")
	if err != nil {
		panic(err)
	}
	fmt.Println("completed:", x.Completed)
	for _, c := range x.LastStep.Commands {
		fmt.Printf("sends %s %+v\n", c.Type, c.Command)
	}
	// Output:
	// handled
	// duplicate
	// deadline hotel at 10:00AM
	// completed: true
	// sends hotel.decline-booking {BookingID:d Reason:no answer from the hotel}
}
