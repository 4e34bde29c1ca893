package postgres_test

import (
	"testing"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/storetest/linearize"
)

// TestLinearizable records histories of clients racing appends and reads in
// a schema of their own and checks each with porcupine; CAIRN_TORTURE=1
// runs the full size. An append whose context ends may have committed (the
// cancellation can come after the COMMIT reached the server): its outcome
// is unknown to the checker.
func TestLinearizable(t *testing.T) {
	linearize.Run(t, func(t *testing.T) eventstore.Store {
		return newStore(t, postgres.Options{})
	}, linearize.Sized(t))
}
