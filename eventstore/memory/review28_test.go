package memory_test

// Review 28: adversarial tests of the memory store's log of chunks, stream
// index, in-place ID lookup and page copies, through the public API.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
)

func r28Event(i int) eventstore.EventData {
	return eventstore.EventData{
		ID:            eventstore.NewEventID(),
		Type:          "t",
		SchemaVersion: 1,
		Data:          []byte(fmt.Sprintf(`{"i":%d}`, i)),
		Metadata:      eventstore.Metadata{Extra: map[string]string{"k": fmt.Sprint(i)}},
	}
}

func r28Read(t *testing.T, s eventstore.Store, stream string, opts eventstore.ReadOptions) []eventstore.Event {
	t.Helper()
	var out []eventstore.Event
	for e, err := range s.ReadStream(context.Background(), stream, opts) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// What the caller passed to Append, and what a read returned, share no
// memory with the store: changing them, or appending to a read event's
// data, changes neither the store nor another read event.
func TestReview28CallerCannotReachStoredData(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	defer s.Close()
	in := []eventstore.EventData{r28Event(0), r28Event(1), r28Event(2)}
	// Caller data that share one backing array, as a caller's slicing may.
	shared := []byte(`aaaabbbbcccc`)
	in[0].Data, in[1].Data, in[2].Data = shared[0:4], shared[4:8], shared[8:12]
	if _, err := s.Append(ctx, "s", eventstore.NoStream, in...); err != nil {
		t.Fatal(err)
	}
	// Change everything the caller still holds.
	copy(shared, "XXXXXXXXXXXX")
	for i := range in {
		in[i].Metadata.Extra["k"] = "changed"
		in[i].Metadata.Extra["new"] = "x"
	}
	page := r28Read(t, s, "s", eventstore.Forward(0))
	want := []string{"aaaa", "bbbb", "cccc"}
	for i, e := range page {
		if string(e.Data) != want[i] || e.Metadata.Extra["k"] != fmt.Sprint(i) || len(e.Metadata.Extra) != 1 {
			t.Fatalf("event %d reads %q %v after the caller changed its input", i, e.Data, e.Metadata.Extra)
		}
		if cap(e.Data) != len(e.Data) {
			t.Fatalf("event %d data has cap %d > len %d: an append reaches the next event", i, cap(e.Data), len(e.Data))
		}
	}
	// Append to and overwrite what the read returned.
	grown := append(page[0].Data, "ZZZZ"...)
	_ = grown
	if string(page[1].Data) != "bbbb" {
		t.Fatalf("appending to event 0's data changed event 1's: %q", page[1].Data)
	}
	for i := range page {
		copy(page[i].Data, "YYYY")
		page[i].Metadata.Extra["k"] = "read-changed"
	}
	for i, e := range r28Read(t, s, "s", eventstore.Forward(0)) {
		if string(e.Data) != want[i] || e.Metadata.Extra["k"] != fmt.Sprint(i) {
			t.Fatalf("event %d reads %q %v after a reader changed its copy", i, e.Data, e.Metadata.Extra)
		}
	}
	for e, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		if err != nil {
			t.Fatal(err)
		}
		if cap(e.Data) != len(e.Data) {
			t.Fatalf("ReadAll event %d data has cap %d > len %d", e.Version, cap(e.Data), len(e.Data))
		}
	}
}

// Empty data stays empty and non-nil, next to non-empty neighbours in one
// page array.
func TestReview28EmptyDataInAPage(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	defer s.Close()
	es := []eventstore.EventData{r28Event(0), r28Event(1), r28Event(2)}
	es[1].Data = []byte{}
	if _, err := s.Append(ctx, "s", eventstore.NoStream, es...); err != nil {
		t.Fatal(err)
	}
	page := r28Read(t, s, "s", eventstore.Forward(0))
	if page[1].Data == nil || len(page[1].Data) != 0 || cap(page[1].Data) != 0 {
		t.Fatalf("empty data reads as %#v (cap %d)", page[1].Data, cap(page[1].Data))
	}
	page[1].Data = append(page[1].Data, 'Q')
	if !bytes.Equal(page[2].Data, []byte(`{"i":2}`)) {
		t.Fatalf("appending to empty data changed the next event's: %q", page[2].Data)
	}
}

// Repeats and conflicts around the 32 events at which a stream's IDs move
// from in-place comparison to a map: every stored event appended again at
// its place is a duplicate with its place's result; at another place it
// is an EventIDConflict; a tail that straddles the boundary too.
func TestReview28RepeatsAroundTheScanBoundary(t *testing.T) {
	ctx := context.Background()
	for _, n := range []int{1, 2, 3, 31, 32, 33, 34, 64, 65} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			s := memory.New()
			defer s.Close()
			var ids []eventstore.EventData
			var results []eventstore.AppendResult
			for i := range n {
				e := r28Event(i)
				r, err := s.Append(ctx, "s", eventstore.Any, e)
				if err != nil {
					t.Fatal(err)
				}
				ids, results = append(ids, e), append(results, r)
			}
			for v := range n {
				exp := eventstore.NoStream
				if v > 0 {
					exp = eventstore.Exact(uint64(v - 1))
				}
				r, err := s.Append(ctx, "s", exp, ids[v])
				if err != nil || !r.Duplicate || r.FirstVersion != uint64(v) || r.Position != results[v].Position {
					t.Fatalf("repeat of event %d at its place: %+v, %v", v, r, err)
				}
				// Any: a repeat of the stored events is a duplicate too.
				r, err = s.Append(ctx, "s", eventstore.Any, ids[v])
				if v == n-1 {
					if err != nil || !r.Duplicate || r.FirstVersion != uint64(v) {
						t.Fatalf("Any repeat of the last event %d: %+v, %v", v, r, err)
					}
				} else if !errors.Is(err, eventstore.ErrEventIDConflict) && !(err == nil && r.Duplicate) {
					t.Fatalf("Any repeat of event %d: %+v, %v", v, r, err)
				}
				// At another place: the end.
				_, err = s.Append(ctx, "s", eventstore.Exact(uint64(n-1)), ids[v])
				if !errors.Is(err, eventstore.ErrEventIDConflict) {
					t.Fatalf("repeat of event %d at the end: %v", v, err)
				}
				// With a new event after it: a partial repeat.
				_, err = s.Append(ctx, "s", exp, ids[v], r28Event(1000))
				if v == n-1 {
					// The last event then a new one: the stored prefix is a
					// partial repeat.
					if !errors.Is(err, eventstore.ErrEventIDConflict) {
						t.Fatalf("partial repeat of event %d: %v", v, err)
					}
				} else if !errors.Is(err, eventstore.ErrEventIDConflict) {
					t.Fatalf("partial repeat of event %d: %v", v, err)
				}
			}
			// The whole stream at once, and every suffix at its place.
			for from := range n {
				exp := eventstore.NoStream
				if from > 0 {
					exp = eventstore.Exact(uint64(from - 1))
				}
				r, err := s.Append(ctx, "s", exp, ids[from:]...)
				if err != nil || !r.Duplicate || r.FirstVersion != uint64(from) || r.LastVersion != uint64(n-1) ||
					r.Position != results[n-1].Position {
					t.Fatalf("repeat of events %d..%d: %+v, %v", from, n-1, r, err)
				}
			}
			if got := len(r28Read(t, s, "s", eventstore.Forward(0))); got != n {
				t.Fatalf("stream holds %d events, want %d", got, n)
			}
		})
	}
}

// A stream grown past 32 events by one multi-event append keeps every ID
// findable: the map is built from events the same append wrote.
func TestReview28OneAppendPastTheScanBoundary(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	defer s.Close()
	var es []eventstore.EventData
	for i := range 40 {
		es = append(es, r28Event(i))
	}
	if _, err := s.Append(ctx, "s", eventstore.NoStream, es[:30]...); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "s", eventstore.Exact(29), es[30:]...); err != nil {
		t.Fatal(err)
	}
	for v, e := range es {
		_, err := s.Append(ctx, "s", eventstore.Exact(39), e)
		var conflict *eventstore.EventIDConflictError
		if !errors.As(err, &conflict) {
			t.Fatalf("event %d at another place: %v", v, err)
		}
	}
	// And a stream whose IDs were looked up in place keeps them apart from
	// another stream's: the same ID in two streams is no conflict.
	for v, e := range es[:35] {
		if _, err := s.Append(ctx, "other", eventstore.Any, e); err != nil {
			t.Fatalf("event %d in another stream: %v", v, err)
		}
	}
}

// Positions, ReadAll after every position, backward reads and a
// subscription across the log's 512-event chunks.
func TestReview28AcrossChunks(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	defer s.Close()
	const n = 3*512 + 7
	streams := []string{"a", "b", "c"}
	for i := 0; i < n; {
		k := 1 + i%5
		var es []eventstore.EventData
		for j := 0; j < k && i < n; j++ {
			es = append(es, r28Event(i))
			i++
		}
		if _, err := s.Append(ctx, streams[i%3], eventstore.Any, es...); err != nil {
			t.Fatal(err)
		}
	}
	var all []eventstore.Event
	for e, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, e)
	}
	if len(all) != n {
		t.Fatalf("ReadAll yields %d events, want %d", len(all), n)
	}
	for i, e := range all {
		if e.Position.Major != uint64(i+1) || string(e.Data) != fmt.Sprintf(`{"i":%d}`, i) {
			t.Fatalf("event %d: position %v data %q", i, e.Position, e.Data)
		}
	}
	for _, after := range []int{0, 1, 510, 511, 512, 513, 1023, 1024, 1025, 1535, 1536, 1537, n - 1, n, n + 5} {
		i := after
		for e, err := range s.ReadAll(ctx, eventstore.Position{Major: uint64(after)}, eventstore.Filter{}) {
			if err != nil {
				t.Fatal(err)
			}
			if e.Position.Major != uint64(i+1) {
				t.Fatalf("after %d: got position %v, want %d", after, e.Position, i+1)
			}
			i++
		}
		if want := max(n, after); i != want {
			t.Fatalf("after %d: read up to %d, want %d", after, i, want)
		}
	}
	for _, st := range streams {
		fwd := r28Read(t, s, st, eventstore.Forward(0))
		bwd := r28Read(t, s, st, eventstore.Backward(eventstore.End))
		if len(fwd) != len(bwd) {
			t.Fatalf("stream %s: %d forward, %d backward", st, len(fwd), len(bwd))
		}
		for i := range fwd {
			b := bwd[len(bwd)-1-i]
			if fwd[i].Version != uint64(i) || b.ID != fwd[i].ID || !bytes.Equal(b.Data, fwd[i].Data) {
				t.Fatalf("stream %s version %d: forward %v, backward %v", st, i, fwd[i].Version, b.Version)
			}
		}
		for _, lim := range []int{1, 2, 511, 512, 513, 1000} {
			got := r28Read(t, s, st, eventstore.ReadOptions{From: eventstore.End, Backward: true, Limit: lim})
			if len(got) != min(lim, len(fwd)) || got[0].Version != uint64(len(fwd)-1) {
				t.Fatalf("stream %s backward limit %d: %d events", st, lim, len(got))
			}
		}
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	i := 500
	for e, err := range s.Subscribe(sctx, eventstore.Position{Major: 500}, eventstore.Filter{}) {
		if err != nil {
			break
		}
		if e.Position.Major != uint64(i+1) {
			t.Fatalf("subscription: got %v, want %d", e.Position, i+1)
		}
		i++
		if i == n {
			cancel()
		}
	}
	if i != n {
		t.Fatalf("subscription stopped at %d", i)
	}
}

// Concurrent appends to many streams (new streams and growing ones, past
// the scan boundary and chunk bounds) with concurrent readers, under
// -race: every event once, in order, each stream dense.
func TestReview28ConcurrentAppendsAndReads(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	defer s.Close()
	const writers, per = 8, 150
	var wg sync.WaitGroup
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	seen := make(chan int, 1)
	go func() {
		count, last := 0, eventstore.Position{}
		versions := map[string]uint64{}
		for e, err := range s.Subscribe(sctx, eventstore.Start, eventstore.Filter{}) {
			if err != nil {
				break
			}
			if !last.Before(e.Position) {
				t.Errorf("subscription out of order: %v after %v", e.Position, last)
			}
			if v, ok := versions[e.StreamID]; ok && v+1 != e.Version || !ok && e.Version != 0 {
				t.Errorf("stream %s: version %d after %d", e.StreamID, e.Version, v)
			}
			versions[e.StreamID], last = e.Version, e.Position
			count++
			if count == writers*per*2 {
				break
			}
		}
		seen <- count
	}()
	for w := range writers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range per {
				// One long stream per writer, and one new stream per event.
				e := r28Event(i)
				exp := eventstore.NoStream
				if i > 0 {
					exp = eventstore.Exact(uint64(i - 1))
				}
				if _, err := s.Append(ctx, fmt.Sprintf("long-%d", w), exp, e); err != nil {
					t.Error(err)
					return
				}
				if _, err := s.Append(ctx, fmt.Sprintf("new-%d-%d", w, i), eventstore.NoStream, r28Event(i)); err != nil {
					t.Error(err)
					return
				}
				// A repeat: a duplicate.
				if r, err := s.Append(ctx, fmt.Sprintf("long-%d", w), eventstore.Any, e); err != nil || !r.Duplicate {
					t.Errorf("repeat: %+v %v", r, err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range 30 {
				for e, err := range s.ReadStream(ctx, fmt.Sprintf("long-%d", w), eventstore.Backward(eventstore.End)) {
					if err != nil {
						t.Error(err)
						return
					}
					_ = append(e.Data, 'x')
				}
			}
		}()
	}
	wg.Wait()
	if got := <-seen; got != writers*per*2 {
		t.Fatalf("subscription saw %d events, want %d", got, writers*per*2)
	}
}
