package kurrentdb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/kurrentdb"
	"github.com/cairn-es/cairn/eventstore/kurrentdb/internal/testserver"
	"github.com/cairn-es/cairn/eventstore/storetest"
)

// TestConformance runs Cairn's conformance suite against the store on the
// protocol-level test server, one store per test on one server, as
// services share a KurrentDB.
func TestConformance(t *testing.T) {
	srv := testserver.New(t)
	storetest.Run(t, func(t testing.TB) eventstore.Store {
		s, err := kurrentdb.Open(context.Background(), srv.URL(), kurrentdb.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}, storetest.Options{})
}
