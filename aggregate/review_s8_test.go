package aggregate_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/upcast"
)

// S8Acct logs every value it applies, so that any difference between the
// values a save applies and those a replay applies shows in its state.
type S8Acct struct {
	ID  string   `json:"id"`
	Log []string `json:"log"`
}

type (
	// S8Flat is exact; N == -1 panics in Apply.
	S8Flat struct {
		N   int    `json:"n"`
		S   string `json:"s"`
		Pad string `json:"pad"`
	}
	// S8List is inexact (a slice); it is what s8.pair v1 splits into.
	S8List struct {
		L []int `json:"l"`
	}
	S8In   struct{ F float64 }
	S8Omit struct {
		In S8In `json:"in,omitzero"`
	}
)

func (a *S8Acct) Handle(_ context.Context, cmd any) ([]any, error) {
	switch c := cmd.(type) {
	case S8Do:
		if c.Check {
			return []any{S8Flat{N: len(a.Log), S: "chk:" + s8Digest(a.Log)}}, nil
		}
		return s8Batch(c.Seed, c.N), nil
	}
	return cmd.([]any), nil
}

// S8Do is a bus command: a batch of N events, or (Check) one event
// carrying a digest of the state the decision saw, which Apply checks
// against the state it is applied to.
type S8Do struct {
	Agg     string
	Seed, N int
	Check   bool
}

func (c S8Do) AggregateID() string { return c.Agg }

func s8Digest(log []string) string {
	h := sha256.Sum256([]byte(strings.Join(log, "\n")))
	return fmt.Sprintf("%x", h[:8])
}

func (a *S8Acct) Apply(event any) error {
	switch e := event.(type) {
	case S8Flat:
		if e.N == -1 {
			panic("boom in " + a.ID)
		}
		if strings.HasPrefix(e.S, "chk:") {
			if e.S != "chk:"+s8Digest(a.Log) || e.N != len(a.Log) {
				a.Log = append(a.Log, "MISMATCH")
			}
			a.Log = append(a.Log, "check")
			return nil
		}
		a.Log = append(a.Log, fmt.Sprintf("flat %d %q %d", e.N, e.S, len(e.Pad)))
	case S8List:
		if len(e.L) > 0 {
			s8WeakInts.add(&e.L[0])
		}
		if s8Nest != nil {
			s8Nest(a.ID)
		}
		a.Log = append(a.Log, fmt.Sprintf("list %v", e.L))
	case S8Omit:
		a.Log = append(a.Log, fmt.Sprintf("omit %v signbit=%v", e.In.F, math.Signbit(e.In.F)))
	default:
		return fmt.Errorf("unknown event %T", event)
	}
	return nil
}

type s8IntWeak struct {
	mu   sync.Mutex
	on   bool
	ptrs []weak.Pointer[int]
}

func (w *s8IntWeak) add(p *int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.on {
		w.ptrs = append(w.ptrs, weak.Make(p))
	}
}

var s8WeakInts s8IntWeak

// s8Registry: s8.pair v1 {"a":x,"b":y} splits into two s8.list v1 values
// (its stored data recorded in w, when set).
func s8Registry(t *testing.T, w *s7Weak) *codec.Registry {
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[S8Acct](reg, "s8.acct", 1))
	require.NoError(t, codec.Register[S8Flat](reg, "s8.flat", 1))
	require.NoError(t, codec.Register[S8List](reg, "s8.list", 1))
	require.NoError(t, codec.Register[S8Omit](reg, "s8.omit", 1))
	require.NoError(t, reg.Upcast(upcast.Split("s8.pair", 1, func(r upcast.Raw) ([]upcast.Raw, error) {
		if w != nil && len(r.Data) > 0 {
			w.mu.Lock()
			w.ptrs = append(w.ptrs, weak.Make(&r.Data[0]))
			w.mu.Unlock()
		}
		var v struct{ A, B int }
		if err := json.Unmarshal(r.Data, &v); err != nil {
			return nil, err
		}
		return []upcast.Raw{
			{Type: "s8.list", Version: 1, Data: []byte(fmt.Sprintf(`{"l":[%d,%d]}`, v.A, v.B))},
			{Type: "s8.list", Version: 1, Data: []byte(fmt.Sprintf(`{"l":[%d]}`, v.B))},
		}, nil
	}).Into(upcast.Key{Type: "s8.list", Version: 1})))
	require.NoError(t, reg.Validate())
	return reg
}

func s8Repo(t *testing.T, store eventstore.Store, reg *codec.Registry, every uint64) *aggregate.Repository[S8Acct, *S8Acct] {
	typ, err := aggregate.NewType[S8Acct]("s8acct", aggregate.Options[S8Acct]{
		New:           func(id string) *S8Acct { return &S8Acct{ID: id} },
		SnapshotEvery: every,
	})
	require.NoError(t, err)
	repo, err := aggregate.NewRepository(store, reg, typ, aggregate.RepositoryOptions{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	return repo
}

func s8Stores() map[string]func(t *testing.T) eventstore.Store {
	return map[string]func(t *testing.T) eventstore.Store{
		"memory": func(t *testing.T) eventstore.Store {
			s := memory.New()
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		"sqlite": func(t *testing.T) eventstore.Store {
			s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "s8.db"), sqlite.Options{})
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
	}
}

func s8Raw(typ string, data string) eventstore.EventData {
	return eventstore.EventData{Type: typ, SchemaVersion: 1, Data: []byte(data)}
}

func s8AppendRaw(t *testing.T, store eventstore.Store, id string, evs []eventstore.EventData) {
	for i := 0; i < len(evs); i += 200 {
		_, err := store.Append(context.Background(), "s8acct-"+id, eventstore.Any, evs[i:min(i+200, len(evs))]...)
		require.NoError(t, err)
	}
}

// s8Batch is a mixed decision of n events: exact values, pointers to
// them, inexact values, strings that are not valid UTF-8.
func s8Batch(seed, n int) []any {
	out := make([]any, 0, n)
	for i := range n {
		k := seed*31 + i
		switch k % 5 {
		case 0:
			out = append(out, S8Flat{N: k, S: fmt.Sprint("s", k)})
		case 1:
			out = append(out, &S8Flat{N: k, S: "ptr"})
		case 2:
			out = append(out, S8List{L: []int{k, -k}})
		case 3:
			out = append(out, S8Flat{N: k, S: "bad \xff\xfe"})
		default:
			out = append(out, &S8List{})
		}
	}
	return out
}

type s8Result struct {
	state   S8Acct
	version uint64
	exists  bool
	err     string
}

func s8Load(ctx context.Context, repo *aggregate.Repository[S8Acct, *S8Acct], id string) s8Result {
	inst, err := repo.Load(ctx, id)
	if err != nil {
		return s8Result{err: err.Error()}
	}
	return s8Result{state: *inst.State, version: inst.Version, exists: inst.Exists}
}

// s8Replayed decodes the stream's events from version from on, as a
// replay applies them.
func s8Replayed(t *testing.T, store eventstore.Store, reg *codec.Registry, id string, from, to uint64) []any {
	var out []any
	for e, err := range store.ReadStream(context.Background(), "s8acct-"+id, eventstore.Forward(from)) {
		require.NoError(t, err)
		if e.Version > to {
			break
		}
		ds, err := reg.Decode(e)
		require.NoError(t, err)
		for _, d := range ds {
			out = append(out, d.Value)
		}
	}
	return out
}

// TestReviewS8SaveAppliesWhatAReplayApplies: single-threaded, Save of
// batches from 1 to 12 events (Save keeps 4 answers on its stack and
// allocates beyond) through one repository, each state compared with a
// fresh load and each Outcome.Events with the decoded stored events.
func TestReviewS8SaveAppliesWhatAReplayApplies(t *testing.T) {
	for name, open := range s8Stores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			store := open(t)
			reg := s8Registry(t, nil)
			repo := s8Repo(t, store, reg, 0)
			for n := 1; n <= 12; n++ {
				id := fmt.Sprint("b", n)
				inst, err := repo.Load(ctx, id)
				require.NoError(t, err)
				for round := range 3 {
					batch := s8Batch(n+round, n)
					out, err := repo.Save(ctx, inst, batch, aggregate.SaveOptions{})
					require.NoError(t, err)
					require.Len(t, out.Events, n)
					assert.Equal(t, s8Replayed(t, store, reg, id, out.FirstVersion, out.LastVersion), out.Events, "n=%d", n)
					fresh := s8Load(ctx, s8Repo(t, store, reg, 0), id)
					assert.Equal(t, fresh.state, *inst.State, "n=%d", n)
					for i, v := range batch {
						if p, ok := v.(*S8Flat); ok {
							assert.Equal(t, S8Flat{N: p.N, S: p.S}, out.Events[i], "a *T's outcome is a T")
							p.N = 12345 // the caller's pointer is not the outcome's
							assert.NotEqual(t, 12345, out.Events[i].(S8Flat).N)
						}
					}
				}
			}
		})
	}
}

// TestReviewS8SaveOmitZeroNegativeZero: a -0 inside an omitzero struct
// field. RoundTrip says the value in hand is exact, so Save applies -0,
// but the stored JSON is {} and a replay applies +0.
func TestReviewS8SaveOmitZeroNegativeZero(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	reg := s8Registry(t, nil)
	repo := s8Repo(t, store, reg, 0)
	inst, err := repo.Load(ctx, "z")
	require.NoError(t, err)
	out, err := repo.Save(ctx, inst, []any{S8Omit{In: S8In{F: math.Copysign(0, -1)}}}, aggregate.SaveOptions{})
	require.NoError(t, err)
	fresh, err := s8Repo(t, store, reg, 0).Load(ctx, "z")
	require.NoError(t, err)
	assert.Equal(t, fresh.State.Log, inst.State.Log, "the state Save built is not the one a replay builds")
	replayed := s8Replayed(t, store, reg, "z", 0, 0)
	assert.Equal(t, math.Signbit(replayed[0].(S8Omit).In.F), math.Signbit(out.Events[0].(S8Omit).In.F), "Outcome.Events is not what a replay decodes")
}
