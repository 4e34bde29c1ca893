package sqlite_test

import (
	"testing"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/eventstore/storetest/linearize"
)

// TestLinearizable records histories of clients racing appends and reads on
// a store file and checks each with porcupine; CAIRN_TORTURE=1 runs the
// full size.
func TestLinearizable(t *testing.T) {
	opts := linearize.Sized(t)
	// An append whose context ends before the writer takes it is dropped
	// and returns ctx.Err(); one taken completes and reports its outcome.
	opts.CanceledAppendsWriteNothing = true
	linearize.Run(t, func(t *testing.T) eventstore.Store {
		return openTemp(t, sqlite.Options{})
	}, opts)
}
