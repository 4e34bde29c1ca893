package cli_test

import (
	"context"
	neturl "net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/internal/testrig/clitest"
)

// The fixtures are clitest's, shared with the cairn binary's tests on
// KurrentDB (cmd/cairn); these names keep the tests here short.
const (
	seatsDL1 = clitest.SeatsDL1
	seatsDL2 = clitest.SeatsDL2
	sagaDL   = clitest.SagaDL
	missing  = clitest.Missing
)

// consumerStores are the state stores every Cairn store is.
type consumerStores = clitest.ConsumerStores

func buildFixture(t *testing.T, store eventstore.Store) []eventstore.Event {
	t.Helper()
	return clitest.BuildFixture(t, store)
}

// consumerFixture makes a store of backend b with the events and consumers
// of the fixture, closed so that the command line opens it alone, and
// returns its URL and the stored events.
func consumerFixture(t *testing.T, b backend) (string, []eventstore.Event) {
	t.Helper()
	url, store := b.create(t)
	stored := clitest.BuildFixture(t, store)
	clitest.BuildConsumers(t, store, stored)
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
