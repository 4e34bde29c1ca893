package storekit_test

import (
	"testing"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/storetest"
)

// TestReviewS7ConformanceOfADecorator: a correct decorator passes the
// whole conformance suite. It has the memory store's StreamPages by
// embedding, which storekit.StreamPagesOf rightly refuses (it would read
// around the decorator's ReadStream): the suite skips its PagedStreams
// part rather than failing it, as it once did.
func TestReviewS7ConformanceOfADecorator(t *testing.T) {
	storetest.Run(t, func(t testing.TB) eventstore.Store {
		s := memory.New()
		t.Cleanup(func() { _ = s.Close() })
		return decorated{s} // streampagesof_test.go
	}, storetest.Options{})
}
