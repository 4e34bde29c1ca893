package aggregate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/internal/busrepo"
	"github.com/cairn-es/cairn/upcast"
)

// S2bLog remembers every value applied to it, in order.
type S2bLog struct {
	ID   string `json:"id"`
	Seen []int  `json:"seen"`
}

type S2bNoted struct {
	N int `json:"n"`
}

type S2bNote struct{ N int }

func (l *S2bLog) note(_ context.Context, c S2bNote) ([]any, error) { return []any{S2bNoted(c)}, nil }
func (l *S2bLog) noted(e S2bNoted)                                 { l.Seen = append(l.Seen, e.N) }

// s2bRepo's registry upcasts: s2b.noted v1 {"m":x} -> v2 {"n":x}; s2b.pair
// v1 {"n":x} splits into x and x+1000; s2b.noise v1 is dropped; s2b.old v1
// is renamed s2b.noted v1 (then transformed).
func s2bRepo(t *testing.T, store eventstore.Store, snapshotEvery uint64) *aggregate.Repository[S2bLog, *S2bLog] {
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[S2bNoted](reg, "s2b.noted", 2))
	require.NoError(t, codec.Register[S2bLog](reg, "s2b.state", 1))
	require.NoError(t, reg.Upcast(
		upcast.Transform("s2b.noted", 1, func(r upcast.Raw) (upcast.Raw, error) {
			var v struct{ M int }
			if err := json.Unmarshal(r.Data, &v); err != nil {
				return r, err
			}
			return upcast.Raw{Data: []byte(fmt.Sprintf(`{"n":%d}`, v.M))}, nil
		}),
		upcast.Split("s2b.pair", 1, func(r upcast.Raw) ([]upcast.Raw, error) {
			var v struct{ N int }
			if err := json.Unmarshal(r.Data, &v); err != nil {
				return nil, err
			}
			return []upcast.Raw{
				{Type: "s2b.noted", Version: 2, Data: []byte(fmt.Sprintf(`{"n":%d}`, v.N))},
				{Type: "s2b.noted", Version: 2, Data: []byte(fmt.Sprintf(`{"n":%d}`, v.N+1000))},
			}, nil
		}).Into(upcast.Key{Type: "s2b.noted", Version: 2}),
		upcast.Drop("s2b.noise", 1),
		upcast.Rename("s2b.old", 1, "s2b.noted", 1),
	))
	require.NoError(t, reg.Validate())
	typ, err := aggregate.NewType[S2bLog]("s2blog", aggregate.Options[S2bLog]{
		New:           func(id string) *S2bLog { return &S2bLog{ID: id} },
		SnapshotEvery: snapshotEvery,
	}, aggregate.Handles((*S2bLog).note), aggregate.Applies((*S2bLog).noted))
	require.NoError(t, err)
	repo, err := aggregate.NewRepository(store, reg, typ, aggregate.RepositoryOptions{})
	require.NoError(t, err)
	return repo
}

// s2bHistory appends raw events of every kind, k rounds from base, and
// returns what a load must have seen.
func s2bHistory(t *testing.T, store eventstore.Store, stream string, base, rounds int) []int {
	var want []int
	var batch []eventstore.EventData
	for i := base; i < base+rounds; i++ {
		ev := func(typ string, v uint32, data string) eventstore.EventData {
			return eventstore.EventData{Type: typ, SchemaVersion: v, Data: []byte(data), Metadata: eventstore.Metadata{Extra: map[string]string{"i": fmt.Sprint(i)}}}
		}
		switch i % 5 {
		case 0:
			batch = append(batch, ev("s2b.noted", 2, fmt.Sprintf(`{"n":%d}`, i)))
			want = append(want, i)
		case 1:
			batch = append(batch, ev("s2b.noted", 1, fmt.Sprintf(`{"m":%d}`, i)))
			want = append(want, i)
		case 2:
			batch = append(batch, ev("s2b.pair", 1, fmt.Sprintf(`{"n":%d}`, i)))
			want = append(want, i, i+1000)
		case 3:
			batch = append(batch, ev("s2b.noise", 1, `{}`))
		case 4:
			batch = append(batch, ev("s2b.old", 1, fmt.Sprintf(`{"m":%d}`, i)))
			want = append(want, i)
		}
	}
	_, err := store.Append(context.Background(), stream, eventstore.Any, batch...)
	require.NoError(t, err)
	return want
}

func s2bAggStores(t *testing.T) map[string]eventstore.Store {
	mem := memory.New()
	lite, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "s.db"), sqlite.Options{NoPolling: true, Synchronous: sqlite.SyncNormal})
	require.NoError(t, err)
	t.Cleanup(func() { _ = mem.Close(); _ = lite.Close() })
	return map[string]eventstore.Store{"memory": mem, "sqlite": lite}
}

// TestReviewS2bUpcastLoadAndRefresh: events at their current version,
// transformed, split, dropped and renamed, across page boundaries, rebuild
// exactly the state of the events on Load and on Refresh; a recorded
// rejection in between only moves the version.
func TestReviewS2bUpcastLoadAndRefresh(t *testing.T) {
	ctx := context.Background()
	for name, store := range s2bAggStores(t) {
		for _, every := range []uint64{0, 7} {
			t.Run(fmt.Sprintf("%s/snapshot%d", name, every), func(t *testing.T) {
				repo := s2bRepo(t, store, every)
				id := fmt.Sprintf("a%d", every)
				stream := "s2blog-" + id
				want := s2bHistory(t, store, stream, 0, 1100) // three pages
				inst, err := repo.Load(ctx, id)
				require.NoError(t, err)
				require.Equal(t, want, inst.State.Seen)
				require.Equal(t, uint64(1099), inst.Version)

				// Refresh over upcast events appended by someone else.
				want = append(want, s2bHistory(t, store, stream, 1100, 13)...)
				inst, err = busOf(repo).Refresh(ctx, inst)
				require.NoError(t, err)
				require.Equal(t, want, inst.State.Seen, "refresh")
				require.Equal(t, uint64(1112), inst.Version)

				// A recorded rejection moves the version only, on the
				// instance, on a fresh load and on a refresh.
				stale, err := repo.Load(ctx, id)
				require.NoError(t, err)
				_, err = busOf(repo).SaveRejection(ctx, inst, busrepo.Rejection{Reason: "no", Command: "x"}, busrepo.SaveOptions{CommandID: "rej-" + id})
				require.NoError(t, err)
				require.Equal(t, uint64(1113), inst.Version)
				require.Equal(t, want, inst.State.Seen)
				want = append(want, s2bHistory(t, store, stream, 1200, 6)...)
				stale, err = busOf(repo).Refresh(ctx, stale)
				require.NoError(t, err)
				require.Equal(t, want, stale.State.Seen, "refresh over a rejection")
				require.Equal(t, uint64(1119), stale.Version)
				fresh, err := repo.Load(ctx, id)
				require.NoError(t, err)
				require.Equal(t, want, fresh.State.Seen, "load over a rejection")
				require.Equal(t, uint64(1119), fresh.Version)

				// A save on top applies as given.
				_, err = repo.Save(ctx, fresh, []any{S2bNoted{N: -1}}, aggregate.SaveOptions{})
				require.NoError(t, err)
				want = append(want, -1)
				fresh, err = repo.Load(ctx, id)
				require.NoError(t, err)
				require.Equal(t, want, fresh.State.Seen)
				out, found, err := busOf(repo).PriorOutcome(ctx, fresh, "rej-"+id)
				require.NoError(t, err)
				require.True(t, found)
				require.NotNil(t, out.Rejection)
			})
		}
	}
}
