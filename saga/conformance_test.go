package saga_test

import (
	"testing"

	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/saga/sagatest"
)

// TestConformanceOnMemory runs the suite with the consumers in a store of
// their own; storetest.Run runs it on each store with both in one.
func TestConformanceOnMemory(t *testing.T) {
	sagatest.Run(t, func(t testing.TB) sagatest.Stores {
		s := memory.New()
		t.Cleanup(func() { _ = s.Close() })
		return sagatest.Stores{Events: s, Consumers: memory.New()}
	})
}
