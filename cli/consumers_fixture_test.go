package cli_test

import (
	"context"
	neturl "net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// The fixture's dead letter IDs, fixed so that command lines can name them.
const (
	seatsDL1 = "01JC0000000000000000000001" // seats-view, seats-1
	seatsDL2 = "01JC0000000000000000000002" // seats-view, seats-2 (data not JSON)
	sagaDL   = "01JC0000000000000000000003" // saga:sale, saga:sale-1
	missing  = "01JC0000000000000000000099" // no consumer has it
)

// fixtureFailure is when the fixture's dead letters failed.
var fixtureFailure = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// consumerStores are the state stores every Cairn store is.
type consumerStores interface {
	storekit.CheckpointStore
	storekit.LeaseStore
	storekit.DeadLetterStore
}

// buildConsumers adds consumers' state to the fixture, through the store's
// own APIs, so that every consumer command has something to show:
//
//   - orders-view: checkpoint at event 5 (2 pending), lease held live by
//     host-1/orders-view for an hour;
//   - seats-view: caught up, its lease released (lapsed), 2 dead letters;
//   - stalled: checkpoint at event 1 (6 pending), lease released: nobody
//     runs it while events wait;
//   - saga:sale: a saga runner's consumer, caught up, unleased, 1 dead letter.
func buildConsumers(t *testing.T, store eventstore.Store, stored []eventstore.Event) {
	t.Helper()
	ctx := context.Background()
	s, ok := store.(consumerStores)
	require.True(t, ok, "%T keeps checkpoints, leases and dead letters", store)

	save := func(name string, at eventstore.Position, fence storekit.Fence) {
		require.NoError(t, s.SaveCheckpoint(ctx, name, eventstore.Start, at, fence), name)
	}
	lease := func(name, holder string, release bool) storekit.Fence {
		l, ok, err := s.AcquireLease(ctx, name, holder, time.Hour)
		require.NoError(t, err, name)
		require.True(t, ok, name)
		if release {
			require.NoError(t, s.ReleaseLease(ctx, l), name)
		}
		return l.Fence
	}
	park := func(consumer, id string, e eventstore.Event, msg string) {
		_, err := s.ParkDeadLetter(ctx, eventstore.DeadLetter{
			ID: id, Consumer: consumer, Event: e, Error: msg, Attempts: 3,
			FirstFailure: fixtureFailure, LastFailure: fixtureFailure.Add(time.Minute),
		})
		require.NoError(t, err, consumer)
	}

	save("orders-view", stored[5].Position, lease("orders-view", "host-1/orders-view", false))
	save("seats-view", stored[7].Position, lease("seats-view", "host-2/seats-view", true))
	park("seats-view", seatsDL1, stored[2], "seats table: constraint violated")
	park("seats-view", seatsDL2, stored[7], "decoding seats.reserved: invalid character '\\x00'")
	save("stalled", stored[1].Position, lease("stalled", "host-3/stalled", true))
	save("saga:sale", stored[7].Position, 0)
	park("saga:sale", sagaDL, stored[3], "sale: no step for sale.step")
}

// consumerFixture makes a store of backend b with the events and consumers
// of the fixture, closed so that the command line opens it alone, and
// returns its URL and the stored events.
func consumerFixture(t *testing.T, b backend) (string, []eventstore.Event) {
	t.Helper()
	url, store := b.create(t)
	stored := buildFixture(t, store)
	buildConsumers(t, store, stored)
	require.NoError(t, store.Close())
	return url, stored
}

// reopen opens the store at url again, to check what a command did; it is
// closed when t ends.
func reopen(t *testing.T, url string) consumerStores {
	t.Helper()
	ctx := context.Background()
	var s eventstore.Store
	var err error
	if path, ok := strings.CutPrefix(url, "sqlite://"); ok {
		s, err = sqlite.Open(ctx, path, sqlite.Options{})
	} else {
		u, perr := neturl.Parse(url)
		require.NoError(t, perr)
		s, err = postgres.Open(ctx, server.URL, postgres.Options{Schema: u.Query().Get("schema")})
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s.(consumerStores)
}

// substitute replaces {P<n>} in args by the position of stored event n.
func substitute(args []string, stored []eventstore.Event) []string {
	out := make([]string, len(args))
	for i, a := range args {
		for n, e := range stored {
			a = strings.ReplaceAll(a, "{P"+itoa(n)+"}", e.Position.String())
		}
		out[i] = a
	}
	return out
}
