package main

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/projection"
	"github.com/cairn-es/cairn/saga"
	"github.com/cairn-es/cairn/saga/sagatest"
)

// newStays returns the saga type on a registry of its own, as each
// scenario needs a fresh one.
func newStays(t *testing.T) *saga.Type[Stay] {
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, register(reg))
	stay, err := stays(reg)
	require.NoError(t, err)
	return stay
}

func TestAPaidStayIsConfirmed(t *testing.T) {
	sagatest.New(t, newStays(t)).
		Given(BookingPlaced{BookingID: "b-1", Room: "101", Card: "visa", Nights: 2}).
		When(RoomHeld{Room: "101", BookingID: "b-1"}).
		ThenCommands(ChargeCard{BookingID: "b-1", Card: "visa", Amount: 240}).
		ThenDeadlines("hold").
		When(CardCharged{BookingID: "b-1", Amount: 240}).
		ThenCommands(ConfirmBooking{BookingID: "b-1"}).
		ThenDeadlines().
		ThenCompleted()
}

func TestARefusedCardReleasesTheRoom(t *testing.T) {
	sagatest.New(t, newStays(t)).
		Given(
			BookingPlaced{BookingID: "b-2", Room: "102", Card: "declined", Nights: 1},
			RoomHeld{Room: "102", BookingID: "b-2"},
		).
		WhenRejected(ChargeCard{BookingID: "b-2", Card: "declined", Amount: 120}, ErrCardDeclined).
		ThenCommands(
			ReleaseRoom{Room: "102", BookingID: "b-2"},
			VoidCharge{BookingID: "b-2"},
			CancelBooking{BookingID: "b-2", Reason: "card declined"},
		).
		ThenCompleted()
}

func TestAnUnpaidHoldExpires(t *testing.T) {
	sagatest.New(t, newStays(t)).
		Given(
			BookingPlaced{BookingID: "b-4", Room: "104", Card: "3ds", Nights: 1},
			RoomHeld{Room: "104", BookingID: "b-4"},
		).
		WhenTimeElapses(14*time.Minute).
		ThenNoCommands().
		WhenTimeElapses(time.Minute).
		ThenCommands(
			ReleaseRoom{Room: "104", BookingID: "b-4"},
			VoidCharge{BookingID: "b-4"},
			CancelBooking{BookingID: "b-4", Reason: "not paid in time"},
		).
		ThenCompleted()
}

// TestTheHotelEndToEnd runs the service on a SQLite file with a clock the
// test moves, and delivers every command and every stored event twice:
// each booking still ends once, as its card and room dictate.
func TestTheHotelEndToEnd(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "hotel.db"), sqlite.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	clock := sagatest.NewClock(sagatest.Start)
	h, err := newHotel(store, saga.RunnerOptions{Clock: clock})
	require.NoError(t, err)

	waves := [][]PlaceBooking{{
		{BookingID: "b-1", Room: "101", Card: "visa", Nights: 2},
		{BookingID: "b-2", Room: "102", Card: "declined", Nights: 1},
		{BookingID: "b-4", Room: "104", Card: "3ds", Nights: 1},
	}, {
		{BookingID: "b-3", Room: "101", Card: "visa", Nights: 3}, // b-1 has the room
	}}
	for _, wave := range waves {
		for range 2 { // the queue delivers every command twice
			for _, b := range wave {
				_, err := h.bus.Dispatch(ctx, command.Message{ID: "place-" + b.BookingID, Command: b})
				require.NoError(t, err)
			}
			require.NoError(t, h.stays.CatchUp(ctx))
		}
	}
	// Every stored event reaches the saga once more, as after a lost
	// checkpoint: each is a duplicate.
	mapped := eventstore.Filter{Types: []string{"booking.placed", "room.held", "room.unavailable", "payment.card_charged"}}
	for ev, err := range store.ReadAll(ctx, eventstore.Start, mapped) {
		require.NoError(t, err)
		out, err := h.stays.HandleStored(ctx, ev)
		require.NoError(t, err)
		assert.Contains(t, []saga.Outcome{saga.Duplicate, saga.Ignored}, out, "%s #%d", ev.StreamID, ev.Version)
	}
	clock.Advance(holdFor)
	require.NoError(t, h.stays.CatchUp(ctx))

	want := map[string]string{
		"b-1": "confirmed",
		"b-2": "cancelled: card declined",
		"b-3": "cancelled: room unavailable",
		"b-4": "cancelled: not paid in time",
	}
	for id, outcome := range want {
		got, err := h.outcome(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, outcome, got, id)
	}
	var released int
	for ev, err := range store.ReadAll(ctx, eventstore.Start, eventstore.Filter{Types: []string{"room.released"}}) {
		require.NoError(t, err)
		released++
		assert.Contains(t, []string{"room-102", "room-104"}, ev.StreamID)
	}
	assert.Equal(t, 2, released, "each compensation released its room once")
}

// TestReplicasShareTheHotel runs two replicas of the service on one
// SQLite file, as two processes would: they split the saga's segments
// under leases, and every booking ends once.
func TestReplicasShareTheHotel(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	path := filepath.Join(t.TempDir(), "hotel.db")
	// Replicas of the service split the saga's segments between them.
	replicas := saga.RunnerOptions{
		Segments:  8,    // instance IDs hash to 8 segments
		Exclusive: true, // leases in the checkpoint store (or RunnerOptions.Leases)
		LeaseTTL:  10 * time.Second,
	}
	var hotels []*hotel
	var store *sqlite.Store
	done := make(chan error, 2)
	for range 2 {
		var err error
		store, err = sqlite.Open(ctx, path, sqlite.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = store.Close() })
		h, err := newHotel(store, replicas)
		require.NoError(t, err)
		hotels = append(hotels, h)
		go func() { done <- h.stays.Run(ctx) }()
	}
	t.Cleanup(func() {
		stop()
		for range 2 {
			assert.NoError(t, <-done)
		}
	})
	for i := range 6 {
		b := PlaceBooking{BookingID: fmt.Sprintf("b-%d", i), Room: fmt.Sprintf("%d", 200+i), Card: "visa", Nights: 1}
		_, err := hotels[i%2].bus.Dispatch(ctx, command.Message{ID: "place-" + b.BookingID, Command: b})
		require.NoError(t, err)
	}
	// Wait until the saga, on whichever replica holds each segment, is
	// through with everything the bookings caused.
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, projection.Settle(wait, store, hotels[0].stays))
	for i := range 6 {
		got, err := hotels[0].outcome(ctx, fmt.Sprintf("b-%d", i))
		require.NoError(t, err)
		assert.Equal(t, "confirmed", got, "b-%d", i)
	}
}
