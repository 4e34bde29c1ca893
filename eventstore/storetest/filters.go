package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/check"
)

// testBadFilters checks that every store refuses the same filters, on
// ReadAll and on Subscribe, with one [*eventstore.InvalidArgumentError]
// that names the filter entry, before it reads anything.
func testBadFilters(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	mustAppend(t, s, n.stream("a"), eventstore.NoStream, event("x", "1"))
	tooMany := func(max int, entry func(i int) string) []string {
		out := make([]string, max+1)
		for i := range out {
			out[i] = entry(i)
		}
		return out
	}
	cases := []struct {
		name   string
		filter eventstore.Filter
		field  string
	}{
		{"empty type", eventstore.Filter{Types: []string{"x", ""}}, "filter type"},
		{"NUL in type", eventstore.Filter{Types: []string{"x\x00y"}}, "filter type"},
		{"invalid UTF-8 type", eventstore.Filter{Types: []string{"bad\xff"}}, "filter type"},
		{"overlong type", eventstore.Filter{Types: []string{strings.Repeat("t", storekit.MaxTypeLen+1)}}, "filter type"},
		{"too many types", eventstore.Filter{Types: tooMany(storekit.MaxFilterTypes, func(i int) string { return fmt.Sprint("t", i) })}, "filter types"},
		{"NUL in prefix", eventstore.Filter{StreamPrefixes: []string{n.category + "\x00"}}, "filter stream prefix"},
		{"invalid UTF-8 prefix", eventstore.Filter{StreamPrefixes: []string{"\xc3"}}, "filter stream prefix"},
		{"overlong prefix", eventstore.Filter{StreamPrefixes: []string{strings.Repeat("p", storekit.MaxStreamLen+1)}}, "filter stream prefix"},
		{"system prefix", eventstore.Filter{StreamPrefixes: []string{"$ce-"}}, "filter stream prefix"},
		{"too many prefixes", eventstore.Filter{StreamPrefixes: tooMany(storekit.MaxFilterPrefixes, func(i int) string { return fmt.Sprint("p", i, "-") })}, "filter stream prefixes"},
	}
	for _, c := range cases {
		for _, read := range []struct {
			name string
			seq  func(ctx context.Context) func(func(eventstore.Event, error) bool)
		}{
			{"ReadAll", func(ctx context.Context) func(func(eventstore.Event, error) bool) {
				return s.ReadAll(ctx, eventstore.Start, c.filter)
			}},
			{"Subscribe", func(ctx context.Context) func(func(eventstore.Event, error) bool) {
				return s.Subscribe(ctx, eventstore.Start, c.filter)
			}},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			var errs, evs int
			for _, err := range read.seq(ctx) {
				if err == nil {
					evs++
					continue
				}
				errs++
				check.ErrorIs(t, err, eventstore.ErrInvalidArgument, "%s: %s", read.name, c.name)
				var bad *eventstore.InvalidArgumentError
				check.ErrorAs(t, err, &bad, "%s: %s", read.name, c.name)
				check.Equal(t, bad.Field, c.field, "%s: %s", read.name, c.name)
				check.Less(t, len(err.Error()), 2048, "%s: %s: the message stays short", read.name, c.name)
			}
			cancel()
			check.Equal(t, evs, 0, "%s: %s yields no event", read.name, c.name)
			check.Equal(t, errs, 1, "%s: %s yields one error", read.name, c.name)
		}
	}
}

// testLongFilters checks that a filter at the limits works alike on every
// store: the most types and prefixes a filter may list, on ReadAll and on
// Subscribe, select exactly the matching events.
func testLongFilters(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	mustAppend(t, s, n.stream("a"), eventstore.NoStream, event("wanted", "1"), event("other", "2"))
	mustAppend(t, s, n.stream("b"), eventstore.NoStream, event("wanted", "3"))
	mustAppend(t, s, "x"+n.stream("c"), eventstore.NoStream, event("wanted", "4"))

	types := make([]string, storekit.MaxFilterTypes)
	for i := range types {
		types[i] = fmt.Sprintf("%s-unused-%d", n.category, i)
	}
	types[len(types)/2] = "wanted"
	prefixes := make([]string, storekit.MaxFilterPrefixes)
	for i := range prefixes {
		prefixes[i] = fmt.Sprintf("%s-none%d-", n.category, i)
	}
	prefixes[len(prefixes)-1] = eventstore.Category(n.category)
	f := eventstore.Filter{Types: types, StreamPrefixes: prefixes}

	got := readAll(t, s, eventstore.Start, f)
	check.Len(t, got, 2, "ReadAll selects the two %q events in this test's category", "wanted")
	check.Equal(t, got[0].StreamID, n.stream("a"))
	check.Equal(t, got[1].StreamID, n.stream("b"))

	sub := subscribe(t, s, eventstore.Start, f)
	live := sub.take(t, 2)
	check.Equal(t, recordedIDs(live), recordedIDs(got), "Subscribe selects the same events")
	mustAppend(t, s, n.stream("d"), eventstore.NoStream, event("other", "5"), event("wanted", "6"))
	next := sub.take(t, 1)
	check.Equal(t, next[0].StreamID, n.stream("d"))
	check.Equal(t, next[0].Version, uint64(1))
}
