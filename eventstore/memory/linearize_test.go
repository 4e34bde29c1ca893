package memory_test

import (
	"testing"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/storetest/linearize"
)

// TestLinearizable records histories of clients racing appends and reads
// and checks each with porcupine; CAIRN_TORTURE=1 runs the full size.
func TestLinearizable(t *testing.T) {
	opts := linearize.Sized(t)
	// Append checks its context before anything else and never after.
	opts.CanceledAppendsWriteNothing = true
	linearize.Run(t, func(t *testing.T) eventstore.Store {
		s := memory.New()
		t.Cleanup(func() { _ = s.Close() })
		return s
	}, opts)
}
