package lru

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// GetOrAdd adds once per missing key, however many callers race for it,
// counts as a use, and keeps the cache within its size.
func TestGetOrAdd(t *testing.T) {
	c := New[*int](2)
	var adds int
	var mu sync.Mutex
	add := func() *int {
		mu.Lock()
		defer mu.Unlock()
		adds++
		return new(int)
	}
	var wg sync.WaitGroup
	got := make([]*int, 8)
	for i := range got {
		wg.Go(func() { got[i] = c.GetOrAdd("a", add) })
	}
	wg.Wait()
	assert.Equal(t, 1, adds, "one value for one key")
	for _, v := range got {
		assert.Same(t, got[0], v)
	}
	c.GetOrAdd("b", add)
	c.GetOrAdd("a", add) // a is now the most recently used
	c.GetOrAdd("c", add) // b goes
	_, ok := c.Get("b")
	assert.False(t, ok)
	v, ok := c.Get("a")
	assert.True(t, ok)
	assert.Same(t, got[0], v)
	assert.Equal(t, 2, c.Len())

	var none *Cache[*int]
	assert.NotNil(t, none.GetOrAdd("a", add), "a nil cache hands out add's value")
	assert.Equal(t, 0, none.Len())
}

// TestMatchesAModel runs random operations on caches of a few sizes and
// on a plain model (a slice, most recently used first), which must agree
// after every operation on what each key holds and on the length.
func TestMatchesAModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{1, 2, 3, 8} {
		c := New[int](size)
		type kv struct {
			key   string
			value int
		}
		var model []kv // most recently used first
		find := func(key string) int {
			return slices.IndexFunc(model, func(e kv) bool { return e.key == key })
		}
		touch := func(i int) {
			e := model[i]
			model = slices.Insert(slices.Delete(model, i, i+1), 0, e)
		}
		for op := range 20_000 {
			key := strconv.Itoa(r.IntN(2 * size))
			switch r.IntN(4) {
			case 0:
				got, ok := c.Get(key)
				i := find(key)
				require.Equal(t, i >= 0, ok, "op %d: Get(%s)", op, key)
				if ok {
					require.Equal(t, model[i].value, got, "op %d: Get(%s)", op, key)
					touch(i)
				}
			case 1:
				c.Put(key, op)
				if i := find(key); i >= 0 {
					model[i].value = op
					touch(i)
				} else {
					model = slices.Insert(model, 0, kv{key, op})
					model = model[:min(len(model), size)]
				}
			case 2:
				got := c.GetOrAdd(key, func() int { return op })
				if i := find(key); i >= 0 {
					require.Equal(t, model[i].value, got, "op %d: GetOrAdd(%s)", op, key)
					touch(i)
				} else {
					require.Equal(t, op, got)
					model = slices.Insert(model, 0, kv{key, op})
					model = model[:min(len(model), size)]
				}
			default:
				c.Evict(key)
				if i := find(key); i >= 0 {
					model = slices.Delete(model, i, i+1)
				}
			}
			require.Equal(t, len(model), c.Len(), "op %d", op)
		}
	}
}

// TestPutAllocatesOnlyUntilFull checks that a full cache's Put of a new
// key reuses the dropped entry.
func TestPutAllocatesOnlyUntilFull(t *testing.T) {
	c := New[int](4)
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for _, k := range keys[:4] {
		c.Put(k, 1)
	}
	i := 0
	allocs := testing.AllocsPerRun(100, func() {
		c.Put(keys[i%len(keys)], i)
		i++
	})
	assert.Zero(t, allocs)
	assert.Equal(t, 4, c.Len())
}

func TestNilCacheHoldsNothing(t *testing.T) {
	var c *Cache[int]
	c.Put("a", 1)
	_, ok := c.Get("a")
	assert.False(t, ok)
	assert.Equal(t, 2, c.GetOrAdd("a", func() int { return 2 }))
	c.Evict("a")
	assert.Zero(t, c.Len())
	assert.Nil(t, New[int](0))
}
