package sqlite_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/internal/testrig/race"
)

// The review of the lent stream pages (storekit.ReadStreamPagesInto): every
// event a consumer gets from ReadStream is its own, whatever other reads do.

type s2bStore struct {
	name string
	open func(t *testing.T) eventstore.Store
}

func s2bStores() []s2bStore {
	return []s2bStore{
		{"memory", func(t *testing.T) eventstore.Store {
			s := memory.New()
			t.Cleanup(func() { _ = s.Close() })
			return s
		}},
		{"sqlite", func(t *testing.T) eventstore.Store {
			s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "s.db"), sqlite.Options{NoPolling: true, Synchronous: sqlite.SyncNormal})
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return s
		}},
	}
}

func s2bData(stream string, v uint64, pad int) []byte {
	return []byte(fmt.Sprintf(`{"s":%q,"v":%d,"pad":%q}`, stream, v, strings.Repeat(string(rune('a'+v%26)), pad)))
}

func s2bFill(t *testing.T, s eventstore.Store, stream string, n, pad int) {
	t.Helper()
	ctx := context.Background()
	for start := 0; start < n; start += 2000 {
		var batch []eventstore.EventData
		for v := start; v < min(n, start+2000); v++ {
			batch = append(batch, eventstore.EventData{
				Type: "review.s2b", SchemaVersion: 1, Data: s2bData(stream, uint64(v), pad),
				Metadata: eventstore.Metadata{CorrelationID: fmt.Sprintf("corr-%d", v%3), Extra: map[string]string{"k": fmt.Sprint(v), "same": "x"}},
			})
		}
		_, err := s.Append(ctx, stream, eventstore.Any, batch...)
		require.NoError(t, err)
	}
}

// s2bCheck says what is wrong with e, an event of stream s2bFill wrote.
func s2bCheck(stream string, pad int, e eventstore.Event) string {
	switch {
	case e.StreamID != stream:
		return fmt.Sprintf("stream %q, want %q", e.StreamID, stream)
	case !bytes.Equal(e.Data, s2bData(stream, e.Version, pad)):
		return fmt.Sprintf("version %d: data %.60q", e.Version, e.Data)
	case e.Type != "review.s2b":
		return fmt.Sprintf("version %d: type %q", e.Version, e.Type)
	case e.Metadata.CorrelationID != fmt.Sprintf("corr-%d", e.Version%3):
		return fmt.Sprintf("version %d: correlation %q", e.Version, e.Metadata.CorrelationID)
	case len(e.Metadata.Extra) != 2 || e.Metadata.Extra["k"] != fmt.Sprint(e.Version) || e.Metadata.Extra["same"] != "x":
		return fmt.Sprintf("version %d: extra %v", e.Version, e.Metadata.Extra)
	}
	return ""
}

func s2bRequireStream(t *testing.T, stream string, pad int, events []eventstore.Event, first uint64, n int, backward bool, why string) {
	t.Helper()
	require.Len(t, events, n, why)
	for i, e := range events {
		want := first + uint64(i)
		if backward {
			want = first - uint64(i)
		}
		require.Equal(t, want, e.Version, "%s: event %d skipped or repeated", why, i)
		if p := s2bCheck(stream, pad, e); p != "" {
			t.Fatalf("%s: event %d changed: %s", why, i, p)
		}
	}
}

// TestReviewS2bReadOwnership keeps the events of one read and then reads in
// every hostile way the promise names: nested, broken off, cancelled,
// concurrent, appending, scribbling on its own events, closing the store.
// The kept events must not change.
func TestReviewS2bReadOwnership(t *testing.T) {
	for _, st := range s2bStores() {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			s := st.open(t)
			other := st.open(t)
			const na, nb = 1500, 700
			s2bFill(t, s, "a-1", na, 20)
			s2bFill(t, s, "b-1", nb, 3)
			s2bFill(t, other, "a-1", 600, 40)

			kept := collect(t, s.ReadStream(ctx, "a-1", eventstore.Forward(0)))
			s2bRequireStream(t, "a-1", 20, kept, 0, na, false, "first read")
			keptB := collect(t, s.ReadStream(ctx, "b-1", eventstore.Backward(math.MaxUint64)))
			s2bRequireStream(t, "b-1", 3, keptB, nb-1, nb, true, "backward read")

			// Nested: B inside the loop over A, and A inside A.
			var outer, inner []eventstore.Event
			for e, err := range s.ReadStream(ctx, "a-1", eventstore.Forward(0)) {
				require.NoError(t, err)
				outer = append(outer, e)
				if e.Version%300 == 7 {
					inner = append(inner, collect(t, s.ReadStream(ctx, "b-1", eventstore.Forward(0)))...)
					s2bRequireStream(t, "a-1", 40, collect(t, other.ReadStream(ctx, "a-1", eventstore.Forward(0))), 0, 600, false, "other store inside")
				}
			}
			s2bRequireStream(t, "a-1", 20, outer, 0, na, false, "outer of nested")
			for i := 0; i < len(inner); i += nb {
				s2bRequireStream(t, "b-1", 3, inner[i:i+nb], 0, nb, false, "inner of nested")
			}

			// Broken off, at the first event and in the middle of a page.
			var broken []eventstore.Event
			for _, at := range []int{1, 600, 1025} {
				n := 0
				for e, err := range s.ReadStream(ctx, "a-1", eventstore.Forward(0)) {
					require.NoError(t, err)
					broken = append(broken, e)
					if n++; n == at {
						break
					}
				}
			}

			// Cancelled in the middle.
			cctx, cancel := context.WithCancel(ctx)
			var cancelled []eventstore.Event
			var cerr error
			for e, err := range s.ReadStream(cctx, "a-1", eventstore.Forward(0)) {
				if err != nil {
					cerr = err
					break
				}
				cancelled = append(cancelled, e)
				if len(cancelled) == 100 {
					cancel()
				}
			}
			cancel()
			require.ErrorIs(t, cerr, context.Canceled)
			s2bRequireStream(t, "a-1", 20, cancelled, 0, 512, false, "a cancelled read's events")

			// A consumer that appends to the stream it ranges over.
			s2bFill(t, s, "c-1", 520, 5)
			var appending []eventstore.Event
			for e, err := range s.ReadStream(ctx, "c-1", eventstore.Forward(0)) {
				require.NoError(t, err)
				appending = append(appending, e)
				if len(appending) <= 3 {
					_, err := s.Append(ctx, "c-1", eventstore.Any, eventstore.EventData{Type: "review.s2b", SchemaVersion: 1,
						Data:     s2bData("c-1", uint64(520+len(appending)-1), 5),
						Metadata: eventstore.Metadata{CorrelationID: fmt.Sprintf("corr-%d", (520+len(appending)-1)%3), Extra: map[string]string{"k": fmt.Sprint(520 + len(appending) - 1), "same": "x"}}})
					require.NoError(t, err)
				}
			}
			s2bRequireStream(t, "c-1", 5, appending, 0, 523, false, "a read that appends")

			// Concurrent readers that scribble on their own events.
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 3 {
						for e, err := range s.ReadStream(ctx, "a-1", eventstore.ReadOptions{From: uint64(g * 100), Backward: g%2 == 1, Limit: 900}) {
							if err != nil {
								t.Error(err)
								return
							}
							for i := range e.Data {
								e.Data[i] = 'X'
							}
							if e.Metadata.Extra != nil {
								e.Metadata.Extra["k"] = "scribbled"
								e.Metadata.Extra["new"] = "y"
							}
						}
						for e, err := range other.ReadStream(ctx, "a-1", eventstore.Forward(0)) {
							if err != nil {
								t.Error(err)
								return
							}
							clear(e.Data)
							clear(e.Metadata.Extra)
						}
					}
				}()
			}
			wg.Wait()

			// Closed in the middle of a read.
			var closing []eventstore.Event
			var closeErr error
			for e, err := range s.ReadStream(ctx, "a-1", eventstore.Forward(0)) {
				if err != nil {
					closeErr = err
					break
				}
				closing = append(closing, e)
				if len(closing) == 10 {
					require.NoError(t, s.Close())
				}
			}
			require.ErrorIs(t, closeErr, eventstore.ErrClosed)
			s2bRequireStream(t, "a-1", 20, closing, 0, 512, false, "a read the store's closing ends")

			// Nothing any of that did changed what the first reads kept.
			s2bRequireStream(t, "a-1", 20, kept, 0, na, false, "kept after everything")
			s2bRequireStream(t, "b-1", 3, keptB, nb-1, nb, true, "kept backward read after everything")
			s2bRequireStream(t, "a-1", 20, outer, 0, na, false, "outer of nested after everything")
			for i := 0; i < len(inner); i += nb {
				s2bRequireStream(t, "b-1", 3, inner[i:i+nb], 0, nb, false, "inner of nested after everything")
			}
			s2bRequireStream(t, "a-1", 20, broken[:1], 0, 1, false, "broken off after 1")
			s2bRequireStream(t, "a-1", 20, broken[1:601], 0, 600, false, "broken off after 600")
			s2bRequireStream(t, "a-1", 20, broken[601:], 0, 1025, false, "broken off after 1025")
			s2bRequireStream(t, "a-1", 20, cancelled, 0, 512, false, "cancelled after everything")
			s2bRequireStream(t, "c-1", 5, appending, 0, 523, false, "appending read after everything")
		})
	}
}

// TestReviewS2bReadWindows reads a stream of three pages and more through
// many windows: no event is skipped or repeated across pages.
func TestReviewS2bReadWindows(t *testing.T) {
	race.Outside(t)
	for _, st := range s2bStores() {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			s := st.open(t)
			const n = 1537
			s2bFill(t, s, "w-1", n, 1)
			for _, from := range []uint64{0, 1, 511, 512, 513, 1023, 1024, 1025, 1536, 1537, 5000, math.MaxInt64, math.MaxInt64 + 1, math.MaxUint64} {
				for _, limit := range []int{0, 1, 511, 512, 513, 1024, 1025, 1536, 2000} {
					for _, backward := range []bool{false, true} {
						why := fmt.Sprintf("from %d limit %d backward %v", from, limit, backward)
						got := collect(t, s.ReadStream(ctx, "w-1", eventstore.ReadOptions{From: from, Limit: limit, Backward: backward}))
						var first uint64
						var count int
						if backward {
							first = min(from, n-1)
							count = int(first) + 1
						} else if from < n {
							first, count = from, int(n-from)
						}
						if limit > 0 {
							count = min(count, limit)
						}
						if count == 0 {
							require.Empty(t, got, why)
							continue
						}
						s2bRequireStream(t, "w-1", 1, got, first, count, backward, why)
					}
				}
			}
		})
	}
}

// TestReviewS2bNearPageByteLimit reads events of nearly a mebibyte each, so
// that pages end at storekit.MaxPageBytes rather than at their size.
func TestReviewS2bNearPageByteLimit(t *testing.T) {
	race.Outside(t)
	for _, st := range s2bStores() {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			s := st.open(t)
			const n, pad = 11, 1<<20 - 200
			for v := range n {
				_, err := s.Append(ctx, "big-1", eventstore.Any, eventstore.EventData{Type: "review.s2b", SchemaVersion: 1, Data: s2bData("big-1", uint64(v), pad),
					Metadata: eventstore.Metadata{CorrelationID: fmt.Sprintf("corr-%d", v%3), Extra: map[string]string{"k": fmt.Sprint(v), "same": "x"}}})
				require.NoError(t, err)
			}
			fwd := collect(t, s.ReadStream(ctx, "big-1", eventstore.Forward(0)))
			bwd := collect(t, s.ReadStream(ctx, "big-1", eventstore.Backward(math.MaxUint64)))
			lim := collect(t, s.ReadStream(ctx, "big-1", eventstore.ReadOptions{From: 2, Limit: 6}))
			// Reads in between that reuse the buffers.
			for range 3 {
				for e, err := range s.ReadStream(ctx, "big-1", eventstore.Forward(0)) {
					require.NoError(t, err)
					clear(e.Data)
				}
			}
			s2bRequireStream(t, "big-1", pad, fwd, 0, n, false, "forward")
			s2bRequireStream(t, "big-1", pad, bwd, n-1, n, true, "backward")
			s2bRequireStream(t, "big-1", pad, lim, 2, 6, false, "limited")
		})
	}
}

var _ = errors.Is
var _ = assert.Equal
