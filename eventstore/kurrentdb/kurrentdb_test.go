package kurrentdb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/command/commandtest"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/kurrentdb"
	"github.com/cairn-es/cairn/eventstore/kurrentdb/internal/testserver"
	"github.com/cairn-es/cairn/eventstore/storetest"
)

// TestConformance runs Cairn's conformance suite against the store on the
// protocol-level test server, one store per test on one server, as
// services share a KurrentDB.
//
// The command suite runs smaller, as on the other server stores: without a
// command index (KurrentDB has none), a hot aggregate loaded from a
// snapshot scans its whole stream for each new command, so the full size
// (3,200 commands on one stream) reads millions of events and runs for
// more than an hour under the race detector.
func TestConformance(t *testing.T) {
	srv := testserver.New(t)
	storetest.Run(t, func(t testing.TB) eventstore.Store {
		s, err := kurrentdb.Open(context.Background(), srv.URL(), kurrentdb.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}, storetest.Options{
		Commands: commandtest.Options{HotWorkers: 8, HotIncrements: 25, OutcomeRounds: 50},
	})
}
