package storetest

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/check"
)

// testLargeEventsArePagedByBytes: reads came in pages of
// DefaultPageSize events whatever their size, so a reader of large events
// held up to 512 of them (512 MiB) at once. Pages now stop at
// storekit.MaxPageBytes: 40 events of 900 KiB are read whole, in order,
// by ReadAll, ReadStream both ways and Subscribe (which must not take a
// page cut by its bytes for the end of the log), and a reader that holds
// the first of them holds a few pages' worth, not all 36 MB.
func testLargeEventsArePagedByBytes(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	ctx := context.Background()
	stream := n.stream("large")
	const count, size = 40, 900 << 10
	payload := []byte(`"` + strings.Repeat("x", size-2) + `"`)
	for i := 0; i < count; i += 4 {
		batch := make([]eventstore.EventData, 4)
		for j := range batch {
			batch[j] = eventstore.EventData{Type: "large", SchemaVersion: 1, Data: payload}
		}
		_, err := s.Append(ctx, stream, eventstore.Any, batch...)
		check.NoError(t, err)
	}

	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	var held uint64
	seen := 0
	for e, err := range s.ReadAll(ctx, eventstore.Start, n.filter()) {
		check.NoError(t, err)
		if seen == 0 {
			held = heap() - min(before, heap())
		}
		check.Equal(t, e.Version, uint64(seen), "ReadAll")
		seen++
	}
	check.Equal(t, seen, count, "ReadAll read every large event")
	check.Less(t, held, uint64(16<<20), "a reader of the first large event holds %d bytes: its page is bounded by count, not bytes", held)

	seen = 0
	for e, err := range s.ReadStream(ctx, stream, eventstore.Forward(0)) {
		check.NoError(t, err)
		check.Equal(t, e.Version, uint64(seen), "ReadStream forward")
		seen++
	}
	check.Equal(t, seen, count, "ReadStream forward read every large event")
	seen = 0
	for e, err := range s.ReadStream(ctx, stream, eventstore.Backward(count-1)) {
		check.NoError(t, err)
		check.Equal(t, e.Version, uint64(count-1-seen), "ReadStream backward")
		seen++
	}
	check.Equal(t, seen, count, "ReadStream backward read every large event")

	sub, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	seen = 0
	for e, err := range s.Subscribe(sub, eventstore.Start, n.filter()) {
		check.NoError(t, err, "Subscribe stopped after %d large events (a page cut by its bytes taken for the end of the log?)", seen)
		check.Equal(t, e.Version, uint64(seen), "Subscribe")
		if seen++; seen == count {
			break
		}
	}
	check.Equal(t, seen, count, "Subscribe delivered every large event")
}
