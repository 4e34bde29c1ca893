package aggregate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/upcast"
)

// TestReviewS7SplitValuesDoNotOutliveTheLoad: an event split into three
// values, followed by one split into one, leaves the first split's last
// two values in the replayer's value buffer past its length; the load
// ends, the replayer is pooled, and they must not stay reachable.
func TestReviewS7SplitValuesDoNotOutliveTheLoad(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	var mu sync.Mutex
	var made []weak.Pointer[byte]
	pad := strings.Repeat("s", 4096)
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[S7Noted](reg, "s7.noted", 2))
	require.NoError(t, reg.Upcast(upcast.Split("s7.noted", 1, func(r upcast.Raw) ([]upcast.Raw, error) {
		var v struct{ M, K int }
		if err := json.Unmarshal(r.Data, &v); err != nil {
			return nil, err
		}
		out := make([]upcast.Raw, v.K)
		for i := range out {
			data := []byte(fmt.Sprintf(`{"n":%d,"pad":%q}`, v.M+i, pad))
			mu.Lock()
			made = append(made, weak.Make(&data[0]))
			mu.Unlock()
			out[i] = upcast.Raw{Type: "s7.noted", Version: 2, Data: data}
		}
		return out, nil
	}).Into(upcast.Key{Type: "s7.noted", Version: 2})))
	repo := s7RepoOf(t, store, reg, nil, 0)
	_, err := store.Append(ctx, "s7log-x", eventstore.NoStream,
		eventstore.EventData{Type: "s7.noted", SchemaVersion: 1, Data: []byte(`{"M":0,"K":3}`)},
		eventstore.EventData{Type: "s7.noted", SchemaVersion: 1, Data: []byte(`{"M":10,"K":1}`)})
	require.NoError(t, err)
	seen, err := func() (int, error) { // the instance goes before the collection
		inst, err := repo.Load(ctx, "x")
		if err != nil {
			return 0, err
		}
		return len(inst.State.Seen), nil
	}()
	require.NoError(t, err)
	require.Equal(t, 4, seen)
	runtime.GC() // the pooled replayer survives one GC
	alive := 0
	for _, p := range made {
		if p.Value() != nil {
			alive++
		}
	}
	assert.Zero(t, alive, "%d of %d upcast values' data reachable after the load", alive, len(made))
}
