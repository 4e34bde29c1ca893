package aggregate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/testrig/race"
	"github.com/cairn-es/cairn/upcast"
)

// S7Log remembers every value applied to it. A value of -1 panics in
// Apply, -2 calls s7Hook (which may cancel the load's context or close
// the store mid-load).
type S7Log struct {
	ID   string `json:"id"`
	Seen []int  `json:"seen"`
}

type S7Noted struct {
	N   int    `json:"n"`
	Pad string `json:"pad,omitempty"`
}

type S7Note struct{ N int }

var s7Hook = map[string]func(){}

func (l *S7Log) note(_ context.Context, c S7Note) ([]any, error) { return []any{S7Noted{N: c.N}}, nil }
func (l *S7Log) noted(e S7Noted) {
	switch e.N {
	case -1:
		panic(fmt.Sprintf("boom in %s", l.ID))
	case -2:
		if h := s7Hook[l.ID]; h != nil {
			h()
		}
	}
	l.Seen = append(l.Seen, e.N)
}

// s7ViaReadStream hides every interface of the store but eventstore.Store:
// the repository reads it through ReadStream, as before the change.
type s7ViaReadStream struct{ eventstore.Store }

// s7Repo: s7.noted v1 {"m":x} splits into v2 x, x+1, x+2; s7.noise v1 is dropped.
func s7Repo(t *testing.T, store eventstore.Store, snaps storekit.SnapshotStore, every uint64) *aggregate.Repository[S7Log, *S7Log] {
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[S7Noted](reg, "s7.noted", 2))
	require.NoError(t, codec.Register[S7Log](reg, "s7.state", 1))
	require.NoError(t, reg.Upcast(
		upcast.Split("s7.noted", 1, func(r upcast.Raw) ([]upcast.Raw, error) {
			var v struct{ M int }
			if err := json.Unmarshal(r.Data, &v); err != nil {
				return nil, err
			}
			out := make([]upcast.Raw, 3)
			for i := range out {
				out[i] = upcast.Raw{Type: "s7.noted", Version: 2, Data: []byte(fmt.Sprintf(`{"n":%d}`, v.M+i))}
			}
			return out, nil
		}).Into(upcast.Key{Type: "s7.noted", Version: 2}),
		upcast.Drop("s7.noise", 1),
	))
	return s7RepoOf(t, store, reg, snaps, every)
}

// s7RepoOf is the repository of S7Log in store, decoding with reg (which
// it validates), snapshotting every events into snaps (nil: the store's).
func s7RepoOf(t *testing.T, store eventstore.Store, reg *codec.Registry, snaps storekit.SnapshotStore, every uint64) *aggregate.Repository[S7Log, *S7Log] {
	require.NoError(t, reg.Validate())
	typ, err := aggregate.NewType[S7Log]("s7log", aggregate.Options[S7Log]{
		New:           func(id string) *S7Log { return &S7Log{ID: id} },
		SnapshotEvery: every,
	}, aggregate.Handles((*S7Log).note), aggregate.Applies((*S7Log).noted))
	require.NoError(t, err)
	repo, err := aggregate.NewRepository(store, reg, typ, aggregate.RepositoryOptions{Snapshots: snaps, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	return repo
}

func s7Stores(t *testing.T) []func(t *testing.T) (eventstore.Store, func()) {
	return []func(t *testing.T) (eventstore.Store, func()){
		func(t *testing.T) (eventstore.Store, func()) {
			s := memory.New()
			return s, func() { _ = s.Close() }
		},
		func(t *testing.T) (eventstore.Store, func()) {
			s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "s7.db"), sqlite.Options{NoPolling: true, Synchronous: sqlite.SyncNormal})
			require.NoError(t, err)
			return s, func() { _ = s.Close() }
		},
	}
}

// s7Stream is one stream's raw history.
type s7Stream struct {
	id     string
	events []eventstore.EventData
}

func s7Ev(typ string, v uint32, data string) eventstore.EventData {
	return eventstore.EventData{Type: typ, SchemaVersion: v, Data: []byte(data)}
}

func s7Histories() []s7Stream {
	var out []s7Stream
	plain := func(id string, n int, at func(i int) eventstore.EventData) {
		s := s7Stream{id: id}
		for i := range n {
			e := s7Ev("s7.noted", 2, fmt.Sprintf(`{"n":%d}`, i))
			if at != nil {
				if x := at(i); x.Type != "" {
					e = x
				}
			}
			s.events = append(s.events, e)
		}
		out = append(out, s)
	}
	for _, n := range []int{1, 511, 512, 513, 1025} {
		plain(fmt.Sprint("n", n), n, nil)
	}
	// upcast: splits and drops across page boundaries
	plain("upcast", 700, func(i int) eventstore.EventData {
		switch i % 4 {
		case 1:
			return s7Ev("s7.noted", 1, fmt.Sprintf(`{"m":%d}`, 10*i))
		case 3:
			return s7Ev("s7.noise", 1, `{}`)
		}
		return eventstore.EventData{}
	})
	// byte-limited pages: ~1 MiB events, a 4 MiB page holds 5 of them
	pad := strings.Repeat("p", storekit.MaxEventSize-64)
	plain("big", 6, func(i int) eventstore.EventData {
		return s7Ev("s7.noted", 2, fmt.Sprintf(`{"n":%d,"pad":%q}`, i, pad))
	})
	// a bad event inside the second page, and as its first event
	for _, at := range []int{600, 512} {
		plain(fmt.Sprint("baddecode", at), 700, func(i int) eventstore.EventData {
			if i == at {
				return s7Ev("s7.noted", 2, `{"n":`)
			}
			return eventstore.EventData{}
		})
	}
	plain("badupcast", 700, func(i int) eventstore.EventData {
		if i == 530 {
			return s7Ev("s7.noted", 1, `{"m":`)
		}
		return eventstore.EventData{}
	})
	plain("unknown", 700, func(i int) eventstore.EventData {
		if i == 520 {
			return s7Ev("s7.nope", 1, `{}`)
		}
		return eventstore.EventData{}
	})
	plain("panic", 900, func(i int) eventstore.EventData {
		if i == 700 {
			return s7Ev("s7.noted", 2, `{"n":-1}`)
		}
		return eventstore.EventData{}
	})
	for _, hook := range []string{"cancel", "close"} {
		plain("hook"+hook, 700, func(i int) eventstore.EventData {
			if i == 300 {
				return s7Ev("s7.noted", 2, `{"n":-2}`)
			}
			return eventstore.EventData{}
		})
	}
	plain("snappast", 5, nil)
	return out
}

type s7Outcome struct {
	Exists  bool
	Version uint64
	ID      string
	Stream  string
	Seen    []int
	Err     string
	Decode  *codec.DecodeError
	Apply   string
	Closed  bool
	Cancel  bool
}

func s7Describe(inst *aggregate.Instance[S7Log, *S7Log], err error) s7Outcome {
	var o s7Outcome
	if err != nil {
		o.Err = err.Error()
		var de *codec.DecodeError
		if errors.As(err, &de) {
			c := *de
			c.Err = nil
			o.Decode = &c
		}
		var ae *aggregate.ApplyError
		if errors.As(err, &ae) {
			o.Apply = fmt.Sprintf("%s %d %s %d", ae.Stream, ae.Version, ae.Type, ae.SchemaVersion)
		}
		o.Closed = errors.Is(err, eventstore.ErrClosed)
		o.Cancel = errors.Is(err, context.Canceled)
		if inst != nil {
			o.Err += " (and an instance)"
		}
		return o
	}
	return s7Outcome{Exists: inst.Exists, Version: inst.Version, ID: inst.ID, Stream: inst.Stream, Seen: inst.State.Seen}
}

// TestReviewS7PagedLoadsAsReadStreamLoads: the same operations on two
// stores of the same history, one read with the store's page reader, one
// through ReadStream, give the same instances and errors.
func TestReviewS7PagedLoadsAsReadStreamLoads(t *testing.T) {
	race.Outside(t)
	for si, open := range s7Stores(t) {
		for _, every := range []uint64{0, 300} {
			t.Run(fmt.Sprintf("store%d/snap%d", si, every), func(t *testing.T) {
				ctx := context.Background()
				a, closeA := open(t)
				b, closeB := open(t)
				t.Cleanup(closeA)
				t.Cleanup(closeB)
				_, _, ok := storekit.StreamPagesOf(a)
				require.True(t, ok)
				_, _, ok = storekit.StreamPagesOf(s7ViaReadStream{b})
				require.False(t, ok)
				snapsA, _ := a.(storekit.SnapshotStore)
				snapsB, _ := b.(storekit.SnapshotStore)
				repoA := s7Repo(t, a, snapsA, every)
				repoB := s7Repo(t, s7ViaReadStream{b}, snapsB, every)
				hist := s7Histories()
				for _, s := range hist {
					for _, st := range []eventstore.Store{a, b} {
						for i := 0; i < len(s.events); i += 100 {
							_, err := st.Append(ctx, "s7log-"+s.id, eventstore.Any, s.events[i:min(i+100, len(s.events))]...)
							require.NoError(t, err)
						}
					}
				}
				// a snapshot past the end of its stream (when snapshots are on)
				if every > 0 {
					for _, sn := range []storekit.SnapshotStore{snapsA, snapsB} {
						require.NoError(t, sn.SaveSnapshot(ctx, storekit.Snapshot{Stream: "s7log-snappast", Version: 40, Type: "s7.state", SchemaVersion: 1, Data: []byte(`{"id":"snappast","seen":[99]}`)}))
					}
				}
				ids := []string{"missing"}
				for _, s := range hist {
					ids = append(ids, s.id)
				}
				compare := func(what string, ctxA, ctxB context.Context) {
					for _, id := range ids {
						ia, ea := repoA.Load(ctxA, id)
						ib, eb := repoB.Load(ctxB, id)
						assert.Equal(t, s7Describe(ib, eb), s7Describe(ia, ea), "%s: load of %s", what, id)
						if ea == nil && eb == nil && ia.Exists {
							// refresh after one more event
							for _, x := range []struct {
								st eventstore.Store
								i  *aggregate.Instance[S7Log, *S7Log]
								r  *aggregate.Repository[S7Log, *S7Log]
							}{{a, ia, repoA}, {b, ib, repoB}} {
								_, err := x.st.Append(ctx, x.i.Stream, eventstore.Any, s7Ev("s7.noted", 1, `{"m":5000}`))
								require.NoError(t, err)
							}
							ra, ea := busOf(repoA).Refresh(ctxA, ia)
							rb, eb := busOf(repoB).Refresh(ctxB, ib)
							assert.Equal(t, s7Describe(rb, eb), s7Describe(ra, ea), "%s: refresh of %s", what, id)
						}
					}
				}
				s7Hook = map[string]func(){}
				t.Cleanup(func() { s7Hook = map[string]func(){} })
				compare("first", ctx, ctx)
				compare("again", ctx, ctx) // snapshots now saved when on

				// a context canceled from inside the load, mid-stream: the
				// next page's read fails
				ca, cancelA := context.WithCancel(ctx)
				cb, cancelB := context.WithCancel(ctx)
				first := true
				s7Hook["hookcancel"] = func() {
					if first {
						cancelA()
					} else {
						cancelB()
					}
					first = !first
				}
				ia, ea := repoA.Load(ca, "hookcancel")
				ib, eb := repoB.Load(cb, "hookcancel")
				if every == 0 {
					assert.Error(t, ea, "canceled mid-load")
				}
				assert.Equal(t, s7Describe(ib, eb), s7Describe(ia, ea), "canceled mid-load")

				// a canceled context
				compare("canceled", ca, cb)

				// closed mid-load
				first = true
				s7Hook["hookclose"] = func() {
					if first {
						_ = a.Close()
					} else {
						_ = b.Close()
					}
					first = !first
				}
				ia, ea = repoA.Load(ctx, "hookclose")
				ib, eb = repoB.Load(ctx, "hookclose")
				assert.Equal(t, s7Describe(ib, eb), s7Describe(ia, ea), "closed mid-load")
				// closed store
				compare("closed", ctx, ctx)
			})
		}
	}
}
