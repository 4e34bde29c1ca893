package aggregate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/testrig/race"
	"github.com/cairn-es/cairn/upcast"
)

// s7Weak records a weak pointer to the stored data of every event that is
// upcast: the data the store's page reader put in the page buffer.
type s7Weak struct {
	mu   sync.Mutex
	ptrs []weak.Pointer[byte]
}

func (w *s7Weak) take() []weak.Pointer[byte] {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.ptrs
	w.ptrs = nil
	return p
}

// s7WeakRepo: s7.noted v1 {"m":x} becomes v2 {"n":x}, and its stored data
// is recorded in w.
func s7WeakRepo(t *testing.T, store eventstore.Store, w *s7Weak) *aggregate.Repository[S7Log, *S7Log] {
	_, _, paged := storekit.StreamPagesOf(store)
	require.True(t, paged)
	return s7WeakRepoOf(t, store, w)
}

func s7WeakRepoOf(t *testing.T, store eventstore.Store, w *s7Weak) *aggregate.Repository[S7Log, *S7Log] {
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[S7Noted](reg, "s7.noted", 2))
	require.NoError(t, reg.Upcast(upcast.Transform("s7.noted", 1, func(r upcast.Raw) (upcast.Raw, error) {
		if w != nil && len(r.Data) > 0 {
			w.mu.Lock()
			w.ptrs = append(w.ptrs, weak.Make(&r.Data[0]))
			w.mu.Unlock()
		}
		var v struct{ M int }
		if err := json.Unmarshal(r.Data, &v); err != nil {
			return r, err
		}
		return upcast.Raw{Data: []byte(fmt.Sprintf(`{"n":%d}`, v.M))}, nil
	})))
	return s7RepoOf(t, store, reg, nil, 0)
}

func s7Append(t *testing.T, store eventstore.Store, id string, n int, at func(i int) string) []int {
	var want []int
	var batch []eventstore.EventData
	for i := range n {
		data := fmt.Sprintf(`{"m":%d}`, i)
		if at != nil {
			if d := at(i); d != "" {
				data = d
			}
		}
		batch = append(batch, s7Ev("s7.noted", 1, data))
		want = append(want, i)
	}
	for i := 0; i < len(batch); i += 200 {
		_, err := store.Append(context.Background(), "s7log-"+id, eventstore.Any, batch[i:min(i+200, len(batch))]...)
		require.NoError(t, err)
	}
	return want
}

// TestReviewS7LoadsLeaveNoEventReachable: after a load, whether it ran to
// the end, failed on a bad event mid-page, stopped at an Apply panic or
// at a canceled context, no stored event's data stays reachable from the
// repository's pooled replayers (one GC: pooled objects survive it).
//
// Event data is padded past 256 bytes: SQLite cuts smaller data from 4 KiB
// slabs and keeps its last slab in its pooled scratch, by design, on both
// read paths. Under -race, sync.Pool drops a quarter of its Puts, which
// can hide a retention: run it without -race too.
func TestReviewS7LoadsLeaveNoEventReachable(t *testing.T) {
	race.Outside(t) // and sync.Pool drops a quarter of what it is given under the detector
	for _, mode := range []struct {
		path string
		pad  int
	}{{"paged", 300}, {"readstream", 300}} {
		for si, open := range s7Stores(t) {
			t.Run(fmt.Sprint(mode.path, "/pad", mode.pad, "/store", si), func(t *testing.T) {
				s7LeakCheck(t, open, mode.path == "paged", mode.pad)
			})
		}
	}
}

func s7LeakCheck(t *testing.T, open func(t *testing.T) (eventstore.Store, func()), paged bool, padding int) {
	ctx := context.Background()
	store, closeStore := open(t)
	t.Cleanup(closeStore)
	w := &s7Weak{}
	var repo *aggregate.Repository[S7Log, *S7Log]
	if paged {
		repo = s7WeakRepo(t, store, w)
	} else {
		repo = s7WeakRepoOf(t, s7ViaReadStream{store}, w)
	}
	padded := strings.Repeat("w", padding)
	s7Append(t, store, "ok", 1300, func(i int) string { return fmt.Sprintf(`{"m":%d,"pad":%q}`, i, padded) })
	s7Append(t, store, "bad", 1300, func(i int) string {
		if i == 700 {
			return `{"m":` + padded
		}
		return fmt.Sprintf(`{"m":%d,"pad":%q}`, i, padded)
	})
	s7Append(t, store, "panic", 1300, func(i int) string {
		if i == 700 {
			return fmt.Sprintf(`{"m":-1,"pad":%q}`, padded)
		}
		return fmt.Sprintf(`{"m":%d,"pad":%q}`, i, padded)
	})
	s7Append(t, store, "cancel", 1300, func(i int) string {
		if i == 300 {
			return fmt.Sprintf(`{"m":-2,"pad":%q}`, padded)
		}
		return fmt.Sprintf(`{"m":%d,"pad":%q}`, i, padded)
	})
	pad := strings.Repeat("q", storekit.MaxEventSize-64)
	s7Append(t, store, "big", 9, func(i int) string {
		if i == 6 {
			return fmt.Sprintf(`{"m":-1,"pad":%q}`, padded)
		}
		return fmt.Sprintf(`{"m":%d,"pad":%q}`, i, pad)
	})
	cctx, cancel := context.WithCancel(ctx)
	s7Hook = map[string]func(){"cancel": cancel}
	t.Cleanup(func() { s7Hook = map[string]func(){} })
	loads := []struct {
		ctx  context.Context
		id   string
		fail bool
	}{{ctx, "ok", false}, {ctx, "bad", true}, {ctx, "panic", true}, {cctx, "cancel", true}, {ctx, "big", true}}
	for _, l := range loads {
		w.take()
		_, err := repo.Load(l.ctx, l.id) // the instance is let go at once
		require.Equal(t, l.fail, err != nil, "%s: %v", l.id, err)
		ptrs := w.take()
		require.NotEmpty(t, ptrs, l.id)
		runtime.GC()
		alive := 0
		for _, p := range ptrs {
			if p.Value() != nil {
				alive++
			}
		}
		assert.Zero(t, alive, "%s: %d of %d events' data still reachable after the load", l.id, alive, len(ptrs))
	}
}

// TestReviewS7ConcurrentLoadsSeeOnlyTheirOwn: many goroutines load, at
// once, long, byte-limited, short, missing, failing and panicking
// aggregates through one repository, whose replayers' page buffers they
// share one after another: every answer is exactly its own.
func TestReviewS7ConcurrentLoadsSeeOnlyTheirOwn(t *testing.T) {
	for si, open := range s7Stores(t) {
		t.Run(fmt.Sprint("store", si), func(t *testing.T) {
			ctx := context.Background()
			store, closeStore := open(t)
			t.Cleanup(closeStore)
			repo := s7WeakRepo(t, store, nil)
			type kind struct {
				id   string
				want []int
				err  string // a substring of the error
			}
			var kinds []kind
			for _, n := range []int{1, 3, 512, 513, 1025} {
				id := fmt.Sprint("n", n)
				kinds = append(kinds, kind{id: id, want: s7Append(t, store, id, n, func(i int) string {
					return fmt.Sprintf(`{"m":%d}`, i*7+n)
				})})
				for i := range kinds[len(kinds)-1].want {
					kinds[len(kinds)-1].want[i] = i*7 + n
				}
			}
			pad := strings.Repeat("z", storekit.MaxEventSize/2)
			big := s7Append(t, store, "big", 10, func(i int) string { return fmt.Sprintf(`{"m":%d,"pad":%q}`, i, pad) })
			kinds = append(kinds, kind{id: "big", want: big})
			s7Append(t, store, "bad", 900, func(i int) string {
				if i == 600 {
					return `{"m":`
				}
				return ""
			})
			kinds = append(kinds, kind{id: "bad", err: "s7log-bad"})
			s7Append(t, store, "panic", 900, func(i int) string {
				if i == 513 {
					return `{"m":-1}`
				}
				return ""
			})
			kinds = append(kinds, kind{id: "panic", err: "boom in panic"})
			kinds = append(kinds, kind{id: "none"})

			rounds := 24
			if race.Enabled {
				rounds = 8 // eight goroutines still contend for the replayers
			}
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range rounds {
						k := kinds[(g*5+i)%len(kinds)]
						inst, err := repo.Load(ctx, k.id)
						if k.err != "" {
							if assert.Error(t, err, k.id) {
								assert.Contains(t, err.Error(), k.err, k.id)
								var ae *aggregate.ApplyError
								var de *codec.DecodeError
								assert.True(t, errors.As(err, &ae) || errors.As(err, &de), k.id)
							}
							continue
						}
						if !assert.NoError(t, err, k.id) {
							continue
						}
						assert.Equal(t, len(k.want) > 0, inst.Exists, k.id)
						if !slices.Equal(k.want, inst.State.Seen) {
							t.Errorf("%s: saw %d values, want %d", k.id, len(inst.State.Seen), len(k.want))
						}
						if len(k.want) > 0 {
							assert.Equal(t, uint64(len(k.want)-1), inst.Version, k.id)
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}
