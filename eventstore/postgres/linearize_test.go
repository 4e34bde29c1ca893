package postgres_test

import (
	"testing"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/storetest/linearize"
)

// TestLinearizable records histories of clients racing appends and reads in
// a schema of their own and checks each with porcupine; CAIRN_TORTURE=1
// runs the full size. The pool has a connection per client, so that every
// operation is a transaction of its own on the server at the same time as
// the others, rather than waiting for one of pgxpool's default four. An
// append whose context ends may have committed (the cancellation can come
// after the COMMIT reached the server): its outcome is unknown to the
// checker.
func TestLinearizable(t *testing.T) {
	opts := linearize.Sized(t)
	linearize.Run(t, func(t *testing.T) eventstore.Store {
		return newStoreAt(t, withPoolSize(server.URL, opts.Clients), postgres.Options{})
	}, opts)
}
