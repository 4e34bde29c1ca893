// Command sagaguide is the program that docs/sagas.md builds: a hotel
// booking flow in which a saga holds a room, charges a card, and
// compensates when the card is refused or not paid in time.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/saga"
)

func main() {
	dir, err := os.MkdirTemp("", "sagaguide")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(dir, "hotel.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	h, err := newHotel(store, saga.RunnerOptions{})
	if err != nil {
		log.Fatal(err)
	}
	// Two guests, then a third who wants the first one's room.
	for _, wave := range [][]PlaceBooking{{
		{BookingID: "b-1", Room: "101", Card: "visa", Nights: 2},
		{BookingID: "b-2", Room: "102", Card: "declined", Nights: 1},
	}, {
		{BookingID: "b-3", Room: "101", Card: "visa", Nights: 3},
	}} {
		for _, b := range wave {
			if _, err := h.bus.Dispatch(ctx, command.Message{ID: "place-" + b.BookingID, Command: b}); err != nil {
				log.Fatal(err)
			}
		}
		// Run the saga until nothing is left to do: a service runs
		// h.stays.Run(ctx) instead, for as long as it runs.
		if err := h.stays.CatchUp(ctx); err != nil {
			log.Fatal(err)
		}
	}
	for _, id := range []string{"b-1", "b-2", "b-3"} {
		outcome, err := h.outcome(ctx, id)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %s\n", id, outcome)
	}
}

// hotel is the wired service: the store, the bus and the saga's runner.
type hotel struct {
	store eventstore.Store
	reg   *codec.Registry
	bus   *command.Bus
	stays *saga.Runner[Stay]
}

// newHotel wires the service on store, with the saga's runner options.
func newHotel(store eventstore.Store, opts saga.RunnerOptions) (*hotel, error) {
	reg := codec.NewRegistry(codec.Options{})
	if err := register(reg); err != nil {
		return nil, err
	}
	bookings, err1 := aggregate.NewType[Booking]("booking", aggregate.Options[Booking]{},
		aggregate.Handles((*Booking).Place),
		aggregate.Handles((*Booking).Confirm),
		aggregate.Handles((*Booking).Cancel),
		aggregate.Applies((*Booking).Placed),
		aggregate.Applies((*Booking).Confirmed),
		aggregate.Applies((*Booking).Cancelled),
	)
	rooms, err2 := aggregate.NewType[Room]("room", aggregate.Options[Room]{},
		aggregate.Handles((*Room).Hold),
		aggregate.Handles((*Room).Release),
		aggregate.Applies((*Room).Held),
		aggregate.Applies((*Room).Released),
		aggregate.Applies((*Room).Unavailable),
	)
	payments, err3 := aggregate.NewType[Payment]("payment", aggregate.Options[Payment]{},
		aggregate.Handles((*Payment).Charge),
		aggregate.Handles((*Payment).Void),
		aggregate.Applies((*Payment).Charged),
		aggregate.Applies((*Payment).Voided),
	)
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, err
	}
	bus := command.New(store, reg, command.Options{})
	err := errors.Join(
		command.Route[PlaceBooking](bus, bookings),
		command.Route[ConfirmBooking](bus, bookings),
		command.Route[CancelBooking](bus, bookings),
		command.Route[HoldRoom](bus, rooms),
		command.Route[ReleaseRoom](bus, rooms),
		command.Route[ChargeCard](bus, payments),
		command.Route[VoidCharge](bus, payments),
	)
	if err != nil {
		return nil, err
	}
	stay, err := stays(reg)
	if err != nil {
		return nil, err
	}
	runner, err := saga.NewRunner(stay, store, bus, opts)
	if err != nil {
		return nil, err
	}
	return &hotel{store: store, reg: reg, bus: bus, stays: runner}, nil
}

// outcome says how booking id ended, from its stream's last event.
func (h *hotel) outcome(ctx context.Context, id string) (string, error) {
	for ev, err := range h.store.ReadStream(ctx, "booking-"+id, eventstore.Backward(eventstore.End)) {
		if err != nil {
			return "", err
		}
		values, err := h.reg.Decode(ev)
		if err != nil {
			return "", err
		}
		switch e := values[0].Value.(type) {
		case BookingConfirmed:
			return "confirmed", nil
		case BookingCancelled:
			return "cancelled: " + e.Reason, nil
		}
		return "pending", nil
	}
	return "", fmt.Errorf("no booking %q", id)
}
