package storekit_test

// Review 28: PrepareAppend's one-array copy, its scan for repeated IDs and
// its unsorted search for the least bad Extra key, against the rules they
// replaced.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/clip"
)

// r28ExtraProblem is the rule before the change: Extra keys in sorted
// order, the first with a problem.
func r28ExtraProblem(extra map[string]string) string {
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		v := extra[k]
		switch {
		case k == "":
			return "has an empty key"
		case !utf8.ValidString(k) || strings.ContainsFunc(k, func(r rune) bool { return r < 0x20 || r == 0x7f }):
			return fmt.Sprintf("key %s is not printable UTF-8", clip.Quote(k))
		case !utf8.ValidString(v) || strings.ContainsRune(v, 0):
			return fmt.Sprintf("value of key %s is not valid UTF-8 without NUL bytes", clip.Quote(k))
		}
	}
	return ""
}

// The same input always gets the same error, that of the least bad key,
// whatever order the map yields its keys in.
func TestReview28LeastBadExtraKeyIsStable(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(28, 28))
	pieces := []string{"", "a", "b", "A", "z", "\x00", "\x01", "\x7f", "\xff", "é", "\xc3", "~", "aa", "ab", " "}
	for round := range 3000 {
		extra := map[string]string{}
		for range 1 + rng.IntN(8) {
			k := pieces[rng.IntN(len(pieces))] + pieces[rng.IntN(len(pieces))]
			v := pieces[rng.IntN(len(pieces))]
			extra[k] = v
		}
		want := r28ExtraProblem(extra)
		var first string
		for try := range 8 {
			e := eventstore.EventData{Type: "t", Data: []byte{}, Metadata: eventstore.Metadata{Extra: maps.Clone(extra)}}
			_, err := storekit.PrepareAppend(ctx, "s", []eventstore.EventData{e})
			got := ""
			if err != nil {
				var inv *eventstore.InvalidArgumentError
				if !errors.As(err, &inv) || inv.Field != "metadata" {
					t.Fatalf("round %d: %v", round, err)
				}
				got = inv.Reason
			}
			if want == "" {
				if err != nil {
					t.Fatalf("round %d: %q refused: %v", round, extra, err)
				}
				continue
			}
			if err == nil {
				t.Fatalf("round %d: %q accepted, want %q", round, extra, want)
			}
			// The old rule's message, word for word.
			if got != want {
				t.Fatalf("round %d: %q gives %q, want the problem %q", round, extra, got, want)
			}
			if try == 0 {
				first = got
			} else if got != first {
				t.Fatalf("round %d: %q gives %q, then %q", round, extra, first, got)
			}
		}
	}
}

// Repeated IDs are found at every place around the 16 events where the
// map starts, naming the first event that holds the ID; nothing of the
// caller's is changed, and the copies are capped apart.
func TestReview28RepeatedIDsAroundTheScanBoundary(t *testing.T) {
	ctx := context.Background()
	for _, n := range []int{2, 15, 16, 17, 18, 33} {
		for i := range n {
			for j := i + 1; j < n; j++ {
				es := make([]eventstore.EventData, n)
				for k := range es {
					es[k] = eventstore.EventData{ID: eventstore.NewEventID(), Type: "t", Data: []byte("x")}
				}
				es[j].ID = es[i].ID
				_, err := storekit.PrepareAppend(ctx, "s", es)
				var inv *eventstore.InvalidArgumentError
				if !errors.As(err, &inv) || inv.Index != j || inv.Field != "id" ||
					!strings.Contains(inv.Reason, fmt.Sprintf("event %d ", i)) {
					t.Fatalf("n=%d, ID of %d repeated at %d: %v", n, i, j, err)
				}
			}
		}
	}
	// Three events with one ID: the second is named, as a repeat of the first.
	for _, n := range []int{3, 17, 20} {
		es := make([]eventstore.EventData, n)
		id := eventstore.NewEventID()
		for k := range es {
			es[k] = eventstore.EventData{ID: eventstore.NewEventID(), Type: "t", Data: []byte("x")}
		}
		es[0].ID, es[1].ID, es[n-1].ID = id, id, id
		_, err := storekit.PrepareAppend(ctx, "s", es)
		var inv *eventstore.InvalidArgumentError
		if !errors.As(err, &inv) || inv.Index != 1 || !strings.Contains(inv.Reason, "event 0 ") {
			t.Fatalf("n=%d: %v", n, err)
		}
	}
}

func TestReview28PrepareAppendSharesNothing(t *testing.T) {
	ctx := context.Background()
	shared := []byte("aaaabbbbcccc")
	in := []eventstore.EventData{
		{Type: "t", Data: shared[0:4], Metadata: eventstore.Metadata{Extra: map[string]string{"k": "0"}}},
		{Type: "t", Data: shared[4:8]},
		{ID: uuid.MustParse("01890000-0000-7000-8000-000000000001"), Type: "t", Data: shared[8:12]},
	}
	orig := slices.Clone(in)
	out, err := storekit.PrepareAppend(ctx, "s", in)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		if in[i].ID != orig[i].ID {
			t.Fatalf("the caller's event %d got an ID", i)
		}
	}
	if out[0].ID == (uuid.UUID{}) || out[1].ID == (uuid.UUID{}) || out[0].ID == out[1].ID || out[2].ID != in[2].ID {
		t.Fatal("IDs not assigned as they should be")
	}
	copy(shared, "XXXXXXXXXXXX")
	in[0].Metadata.Extra["k"] = "changed"
	if string(out[0].Data) != "aaaa" || string(out[1].Data) != "bbbb" || string(out[2].Data) != "cccc" || out[0].Metadata.Extra["k"] != "0" {
		t.Fatalf("the copies follow the caller's changes: %q %q %q %v", out[0].Data, out[1].Data, out[2].Data, out[0].Metadata.Extra)
	}
	for i := range out {
		if cap(out[i].Data) != len(out[i].Data) {
			t.Fatalf("copy %d: cap %d, len %d", i, cap(out[i].Data), len(out[i].Data))
		}
	}
	_ = append(out[0].Data, "ZZZZ"...)
	if string(out[1].Data) != "bbbb" {
		t.Fatal("an append to one copy reached the next")
	}
	// A refused append changes nothing of the caller's either.
	bad := []eventstore.EventData{{Type: "t", Data: []byte("d")}, {Type: "", Data: []byte("d")}}
	if _, err := storekit.PrepareAppend(ctx, "s", bad); err == nil {
		t.Fatal("bad input accepted")
	}
	if bad[0].ID != (uuid.UUID{}) {
		t.Fatal("a refused append assigned the caller's event an ID")
	}
	// Empty data stays non-nil.
	out, err = storekit.PrepareAppend(ctx, "s", []eventstore.EventData{{Type: "t", Data: []byte{}}, {Type: "t", Data: []byte{}}})
	if err != nil || out[0].Data == nil || out[1].Data == nil {
		t.Fatalf("empty data: %v %#v", err, out)
	}
}
