package sqlite

// Session thirteen's review of the optional type index (schema step 7,
// Options.TypeIndex): reads. Every filter shape against Filter.Match, with
// and without the index, for page sizes and starting positions; large
// events; Subscribe while writers append; the index dropped and built
// under an open store; bad and extreme filters.

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/testrig/race"
)

var s13Types = []string{"a", "b", "c", "it's", "50%", "_x", `o"q`, `back\slash`, "ünï", "日本", "🙂", "a b",
	"[1]", "null", "1", "%", "'", "a\u2028b", "<&>", "A"}

var s13Streams = []string{"order-1", "order-2", "order-10", "orders-1", "ü-1", "日本-1", "%-1", "_-1", "a'b-1",
	"z\U0010FFFF-1", "z\U0010FFFF\U0010FFFF", "A-1", "order-1x"}

var s13Prefixes = []string{"order-1", "order-", "orders", "ü", "日", "%", "_", "a'", "z\U0010FFFF", "z", "A", "nope", "order-1x", "o"}

func s13Open(t testing.TB, path string, opts Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func s13Pos(events []eventstore.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = fmt.Sprintf("%d/%d %s %s", e.Position.Major, e.Position.Minor, e.StreamID, e.Type)
	}
	return out
}

func s13Want(log []eventstore.Event, after eventstore.Position, f eventstore.Filter) []eventstore.Event {
	var want []eventstore.Event
	for _, e := range log {
		if after.Before(e.Position) && f.Match(&e) {
			want = append(want, e)
		}
	}
	return want
}

// pages through readPage from after to the end of the log, checking page
// invariants, and returns every event.
func s13Pages(t testing.TB, s *Store, after eventstore.Position, f eventstore.Filter, limit int) []eventstore.Event {
	t.Helper()
	ctx := context.Background()
	var got []eventstore.Event
	for i := 0; ; i++ {
		require.Less(t, i, 100000, "runaway paging")
		page, err := s.readPage(ctx, after, f, limit)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page.Events), limit)
		prev := after
		for _, e := range page.Events {
			require.True(t, prev.Before(e.Position), "positions not strictly increasing: %v then %v", prev, e.Position)
			require.True(t, f.Match(&e), "event %v does not match filter %+v", e.Position, f)
			prev = e.Position
		}
		require.False(t, page.Through.Before(prev), "Through %v before last event %v", page.Through, prev)
		got = append(got, page.Events...)
		if !page.Full {
			return got
		}
		require.NotEmpty(t, page.Events, "a full page with no events")
		after = page.Through
	}
}

func s13ReadAll(t testing.TB, s *Store, after eventstore.Position, f eventstore.Filter) []eventstore.Event {
	t.Helper()
	var got []eventstore.Event
	for e, err := range s.ReadAll(context.Background(), after, f) {
		require.NoError(t, err)
		got = append(got, e)
	}
	return got
}

// twoStores builds the same log in a file with the type index and one
// without, and returns the stores and the log.
func s13TwoStores(t testing.TB, n int, seed uint64) ([]*Store, []eventstore.Event) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 13))
	stores := make([]*Store, 2)
	for i, ti := range []bool{false, true} {
		stores[i] = s13Open(t, filepath.Join(t.TempDir(), "events.db"),
			Options{TypeIndex: ti, NoPolling: true, Synchronous: SyncNormal})
		require.Equal(t, ti, stores[i].typeIndex)
	}
	for total := 0; total < n; {
		stream := s13Streams[rng.IntN(len(s13Streams))]
		events := make([]eventstore.EventData, 1+rng.IntN(30))
		for j := range events {
			typ := s13Types[min(rng.IntN(len(s13Types)), rng.IntN(len(s13Types)))]
			if rng.IntN(3) == 0 {
				typ = "a"
			}
			events[j] = eventstore.EventData{ID: uuid.New(), Type: typ, Data: []byte("{}")}
		}
		total += len(events)
		for _, s := range stores {
			_, err := s.Append(ctx, stream, eventstore.Any, events...)
			require.NoError(t, err)
		}
	}
	log := s13ReadAll(t, stores[0], eventstore.Start, eventstore.Filter{})
	require.Equal(t, s13Pos(log), s13Pos(s13ReadAll(t, stores[1], eventstore.Start, eventstore.Filter{})))
	return stores, log
}

func s13Filters(rng *rand.Rand) []eventstore.Filter {
	pick := func(from []string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = from[rng.IntN(len(from))]
		}
		return out
	}
	var filters []eventstore.Filter
	fixed := []eventstore.Filter{
		{},
		{Types: []string{"a"}},
		{Types: []string{"zz-none"}},
		{Types: []string{"zz-none", "yy-none"}},
		{Types: []string{"a", "a"}},
		{Types: []string{"it's", "50%"}},
		{Types: []string{`o"q`, `back\slash`, "ünï"}},
		{Types: []string{"日本", "🙂", "a\u2028b", "<&>"}},
		{Types: []string{"[1]", "null", "1"}},
		{Types: []string{"%", "'", "_x"}},
		{Types: []string{"A", "a"}},
		{Types: s13Types[:8]},
		{Types: s13Types[:9]},
		{Types: s13Types},
		{Types: []string{"h", "g", "f", "e", "d", "c", "b", "a", "a", "b"}}, // 8 distinct after dedupe, 10 listed
		{Types: []string{"a", "b"}, StreamPrefixes: []string{"order-1"}},
		{Types: []string{"a", "b"}, StreamPrefixes: s13Prefixes},
		{Types: []string{"a"}, StreamPrefixes: s13Prefixes},
		{Types: s13Types[:8], StreamPrefixes: s13Prefixes[:9]},
		{Types: s13Types[:8], StreamPrefixes: s13Prefixes[:8]},
		{Types: s13Types, StreamPrefixes: s13Prefixes},
		{Types: []string{"a", "c"}, StreamPrefixes: []string{"z\U0010FFFF"}},
		{Types: []string{"a", "c"}, StreamPrefixes: []string{"", "order-2"}},
		{StreamPrefixes: s13Prefixes},
	}
	filters = append(filters, fixed...)
	for range 25 {
		nt := []int{0, 1, 2, 3, 7, 8, 9, 12}[rng.IntN(8)]
		np := []int{0, 0, 1, 2, 8, 9, 11}[rng.IntN(7)]
		f := eventstore.Filter{Types: pick(append(slices.Clone(s13Types), "none-1", "none-2"), nt)}
		if np > 0 {
			f.StreamPrefixes = pick(s13Prefixes, np)
		}
		filters = append(filters, f)
	}
	return filters
}

// Promise 1: every filter shape returns exactly the matching events, with
// and without the index, for page sizes and starting positions.
func TestReviewS13FilterMatrix(t *testing.T) {
	race.Outside(t)
	stores, log := s13TwoStores(t, 1400, 7)
	rng := rand.New(rand.NewPCG(99, 1))
	n := uint64(len(log))
	for _, f := range s13Filters(rng) {
		require.NoError(t, f.Validate())
		starts := []eventstore.Position{eventstore.Start, {Major: 1}, {Major: n / 2, Minor: 3}, {Major: n - 1}, {Major: n}, {Major: n + 5},
			{Major: rng.Uint64N(n)}, {Major: math.MaxInt64 - 1}, {Major: math.MaxUint64}}
		for _, s := range stores {
			for _, after := range starts {
				want := s13Want(log, after, f)
				msg := fmt.Sprintf("filter %+q after %v index %v", f, after, s.typeIndex)
				require.Equal(t, s13Pos(want), s13Pos(s13ReadAll(t, s, after, f)), "ReadAll "+msg)
				for _, limit := range []int{7, 513} {
					require.Equal(t, s13Pos(want), s13Pos(s13Pages(t, s, after, f, limit)), "readPage %d %s", limit, msg)
				}
				for _, limit := range []int{1, 2} {
					page, err := s.readPage(context.Background(), after, f, limit)
					require.NoError(t, err)
					w := want[:min(limit, len(want))]
					require.Equal(t, s13Pos(w), s13Pos(page.Events), "readPage %d %s", limit, msg)
					require.Equal(t, len(want) >= limit, page.Full, msg)
				}
			}
		}
	}
}

// Promise 1, large events: a page cut by MaxPageBytes, in the merge shape
// and the scan shape.
func TestReviewS13LargeEventsCutByBytes(t *testing.T) {
	race.Outside(t)
	ctx := context.Background()
	big := make([]byte, storekit.MaxEventSize-1024)
	big[0] = '"'
	for i := 1; i < len(big)-1; i++ {
		big[i] = 'x'
	}
	big[len(big)-1] = '"'
	for _, ti := range []bool{false, true} {
		s := s13Open(t, filepath.Join(t.TempDir(), "events.db"), Options{TypeIndex: ti, NoPolling: true, Synchronous: SyncNormal})
		types := []string{"a", "b", "c"}
		for i := range 24 {
			data := []byte("{}")
			if i%4 != 3 {
				data = big
			}
			_, err := s.Append(ctx, fmt.Sprintf("s-%d", i%3), eventstore.Any,
				eventstore.EventData{ID: uuid.New(), Type: types[i%3], Data: data})
			require.NoError(t, err)
		}
		log := s13ReadAll(t, s, eventstore.Start, eventstore.Filter{})
		require.Len(t, log, 24)
		for _, f := range []eventstore.Filter{{Types: []string{"a", "b"}}, {Types: []string{"b"}}, {Types: []string{"c", "a", "b"}, StreamPrefixes: []string{"s-0", "s-1"}}} {
			want := s13Want(log, eventstore.Start, f)
			got := s13Pages(t, s, eventstore.Start, f, 512)
			require.Equal(t, s13Pos(want), s13Pos(got), "filter %v index %v", f, ti)
			page, err := s.readPage(ctx, eventstore.Start, f, 512)
			require.NoError(t, err)
			assert.True(t, page.Full, "a page of more than MaxPageBytes is cut")
			assert.Less(t, len(page.Events), len(want))
			require.Equal(t, s13Pos(want), s13Pos(s13ReadAll(t, s, eventstore.Start, f)))
		}
	}
}

// Promise 1, concurrency: Subscribe with a multi-type filter (merge shape
// with the index, scan shape without) while several writers append.
func TestReviewS13SubscribeWhileAppending(t *testing.T) {
	for _, ti := range []bool{false, true} {
		t.Run(fmt.Sprint("index=", ti), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s := s13Open(t, filepath.Join(t.TempDir(), "events.db"), Options{TypeIndex: ti, Synchronous: SyncNormal, PollInterval: 5 * time.Millisecond})
			f := eventstore.Filter{Types: []string{"b", "a", "zz"}}
			const writers, perWriter = 4, 150
			want := 0
			var wg sync.WaitGroup
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range perWriter {
						typ := []string{"a", "b", "c"}[(i+w)%3]
						_, err := s.Append(ctx, fmt.Sprintf("w%d-%d", w, i%5), eventstore.Any,
							eventstore.EventData{ID: uuid.New(), Type: typ, Data: []byte("{}")},
							eventstore.EventData{ID: uuid.New(), Type: "c", Data: []byte("{}")})
						if err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			for w := range writers {
				for i := range perWriter {
					if (i+w)%3 != 2 {
						want++
					}
				}
			}
			var got []eventstore.Event
			for e, err := range s.Subscribe(ctx, eventstore.Start, f) {
				require.NoError(t, err)
				got = append(got, e)
				if len(got) == want {
					break
				}
			}
			wg.Wait()
			log := s13ReadAll(t, s, eventstore.Start, eventstore.Filter{})
			require.Equal(t, s13Pos(s13Want(log, eventstore.Start, f)), s13Pos(got))
		})
	}
}

// Promise 3: a Store opened with the index keeps reading right after
// another process drops it by hand, and builds it back; and vice versa.
func TestReviewS13IndexDroppedAndBuiltUnderOpenStore(t *testing.T) {
	race.Outside(t)
	stores, log := s13TwoStores(t, 800, 3)
	rng := rand.New(rand.NewPCG(5, 5))
	filters := s13Filters(rng)
	check := func(stage string) {
		t.Helper()
		for _, s := range stores {
			for _, f := range filters {
				after := eventstore.Position{Major: 10}
				require.Equal(t, s13Pos(s13Want(log, after, f)), s13Pos(s13Pages(t, s, after, f, 64)),
					"%s: filter %+q index %v", stage, f, s.typeIndex)
			}
		}
	}
	check("warm") // prepares the statements on the reader connections
	for _, s := range stores {
		db, err := sql.Open("sqlite", fileURI(s.path, "_pragma=busy_timeout(5000)"))
		require.NoError(t, err)
		_, err = db.Exec("DROP INDEX IF EXISTS cairn_events_type")
		require.NoError(t, err)
		check("dropped")
		_, err = db.Exec("CREATE INDEX cairn_events_type ON cairn_events (type)")
		require.NoError(t, err)
		check("rebuilt")
		// An index of that name on another column.
		_, err = db.Exec("DROP INDEX cairn_events_type")
		require.NoError(t, err)
		_, err = db.Exec("CREATE INDEX cairn_events_type ON cairn_events (stream)")
		require.NoError(t, err)
		check("wrong column")
		require.NoError(t, db.Close())
	}
}

// Promise 6: bad filters are typed errors, never panics; the longest
// valid filters work in every shape.
func TestReviewS13BadAndExtremeFilters(t *testing.T) {
	ctx := context.Background()
	for _, ti := range []bool{false, true} {
		s := s13Open(t, filepath.Join(t.TempDir(), "events.db"), Options{TypeIndex: ti, NoPolling: true})
		long := strings.Repeat("é", storekit.MaxTypeLen/2)
		_, err := s.Append(ctx, "o-1", eventstore.Any,
			eventstore.EventData{ID: uuid.New(), Type: long, Data: []byte("{}")},
			eventstore.EventData{ID: uuid.New(), Type: "a", Data: []byte("{}")})
		require.NoError(t, err)
		for _, f := range []eventstore.Filter{
			{Types: []string{""}}, {Types: []string{"a", ""}}, {Types: []string{"a\x00b", "c"}}, {Types: []string{"a", "\xff"}},
			{Types: make([]string, storekit.MaxFilterTypes+1)}, {StreamPrefixes: []string{"\x00"}}, {Types: []string{"a", "b"}, StreamPrefixes: []string{"$all"}},
			{Types: []string{"a", strings.Repeat("x", storekit.MaxTypeLen+1)}},
		} {
			for _, err := range s.ReadAll(ctx, eventstore.Start, f) {
				var ia *eventstore.InvalidArgumentError
				require.ErrorAs(t, err, &ia, "filter %q", f)
				break
			}
		}
		many := make([]string, storekit.MaxFilterTypes)
		for i := range many {
			many[i] = fmt.Sprintf("t%04d", i)
		}
		many[len(many)-1] = long
		prefixes := make([]string, storekit.MaxFilterPrefixes)
		for i := range prefixes {
			prefixes[i] = fmt.Sprintf("p%04d", i)
		}
		prefixes[7] = "o-"
		log := s13ReadAll(t, s, eventstore.Start, eventstore.Filter{})
		for _, f := range []eventstore.Filter{
			{Types: many}, {Types: many, StreamPrefixes: prefixes}, {Types: []string{long, "a"}, StreamPrefixes: prefixes},
			{Types: append(slices.Clone(many[len(many)-8:]), "a")[1:]}, // 8 types
		} {
			require.Equal(t, s13Pos(s13Want(log, eventstore.Start, f)), s13Pos(s13ReadAll(t, s, eventstore.Start, f)), "index %v", ti)
		}
	}
}
