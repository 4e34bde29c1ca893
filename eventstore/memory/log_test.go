package memory

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
)

// Streams whose names share a key are chained: each is found by its
// name, and listed.
func TestStreamIndexChainsNamesOfOneKey(t *testing.T) {
	x := newStreamIndex()
	add := func(name string) *stream {
		found, chain := x.find(7, name)
		if found != nil {
			t.Fatalf("find holds %s before it is added", name)
		}
		return x.add(7, name, chain)
	}
	a, b := add("a"), add("b")
	find := func(name string) *stream {
		found, _ := x.find(7, name)
		return found
	}
	if find("a") != a || find("b") != b || find("c") != nil {
		t.Fatal("find does not tell apart the streams of one key")
	}
	var names []string
	for st := range x.all {
		names = append(names, st.name)
	}
	if len(names) != 2 {
		t.Fatalf("all yields %v, want a and b", names)
	}
}

// The log's chunks hold every event at its index, across chunk bounds.
func TestLogKeepsEventsAcrossChunks(t *testing.T) {
	var l eventLog
	for i := range 3*chunkLen + 5 {
		l.add().Version = uint64(i)
	}
	for i := range l.n {
		if got := l.at(i).Version; got != uint64(i) {
			t.Fatalf("event %d holds %d", i, got)
		}
	}
	if l.last().Version != uint64(l.n-1) {
		t.Fatal("last is not the newest event")
	}
}

// A stream finds the IDs it holds alike below and past idScan events,
// where it compares them in place and where it keeps a map: a repeat is a
// duplicate, an ID held elsewhere a conflict.
func TestRepeatsFoundInShortAndLongStreams(t *testing.T) {
	ctx := context.Background()
	for _, n := range []int{3, idScan, idScan + 1, 3 * idScan} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			s := New()
			defer s.Close()
			ids := make([]uuid.UUID, n)
			for i := range ids {
				ids[i] = uuid.New()
				if _, err := s.Append(ctx, "s-1", eventstore.Any, eventstore.EventData{ID: ids[i], Type: "t", Data: []byte("{}")}); err != nil {
					t.Fatal(err)
				}
			}
			for v, id := range ids {
				r, err := s.Append(ctx, "s-1", eventstore.Any, eventstore.EventData{ID: id, Type: "t", Data: []byte("{}")})
				if err != nil || !r.Duplicate || r.FirstVersion != uint64(v) {
					t.Fatalf("repeat of version %d: %+v, %v", v, r, err)
				}
			}
			_, err := s.Append(ctx, "s-1", eventstore.Any,
				eventstore.EventData{ID: uuid.New(), Type: "t", Data: []byte("{}")},
				eventstore.EventData{ID: ids[n-1], Type: "t", Data: []byte("{}")})
			var conflict *eventstore.EventIDConflictError
			if !errors.As(err, &conflict) || conflict.StoredVersion != uint64(n-1) || conflict.Index != 1 {
				t.Fatalf("a partial repeat: %v", err)
			}
		})
	}
}
