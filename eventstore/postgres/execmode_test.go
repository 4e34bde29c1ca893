package postgres_test

import (
	"testing"

	"github.com/cairn-es/cairn/command/commandtest"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/storetest"
	"github.com/cairn-es/cairn/internal/testrig/race"
)

// The store works whatever query mode the caller's pool runs in: pgx
// encodes parameters differently when statements are not prepared (exec)
// or go as text (simple protocol, as behind PgBouncer in transaction mode).
// Every suite runs in each mode, the command bus's small: its size is
// for the races of TestConformance, and the query modes change only how
// each statement goes to the server. For the same reason make test runs
// it without the race detector, which TestConformance's races run under:
// under it, the two modes took 107 s (48 of them large events' bytes
// through pgx's text encoding).
func TestQueryModes(t *testing.T) {
	race.Outside(t)
	for _, mode := range []string{"exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			storetest.Run(t, func(t testing.TB) eventstore.Store {
				return newStoreAt(t, withParam(server.URL, "default_query_exec_mode", mode), postgres.Options{})
			}, storetest.Options{Commands: commandtest.Options{HotWorkers: 2, HotIncrements: 10, OutcomeRounds: 10}})
		})
	}
}
