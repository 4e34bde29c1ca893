package memory

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// Many names under a few keys (chains of streams whose names share a
// hash), adds interleaved with finds of present and absent names, across
// slab growth: every name is found after every step, and all lists each
// stream once. From session six's review of add taking find's chain.
func TestReviewS6StreamIndexCollisions(t *testing.T) {
	for seed := uint64(0); seed < 10; seed++ {
		r := rand.New(rand.NewPCG(seed, 1))
		x := newStreamIndex()
		want := map[string]*stream{}
		keyOf := map[string]uint64{}
		keys := 1 + r.IntN(4)
		for i := 0; i < 600; i++ {
			name := fmt.Sprintf("n%d", r.IntN(400))
			h := uint64(r.IntN(keys))
			if k, ok := keyOf[name]; ok {
				h = k
			}
			found, chain := x.find(h, name)
			if found != want[name] {
				t.Fatalf("seed %d: find(%d, %s) = %p, want %p", seed, h, name, found, want[name])
			}
			if found == nil {
				// an unrelated find between find and add, as reads do under RLock
				other := fmt.Sprintf("n%d", r.IntN(400))
				if k, ok := keyOf[other]; ok {
					if f, _ := x.find(k, other); f != want[other] {
						t.Fatalf("lost %s", other)
					}
				}
				st := x.add(h, name, chain)
				if st.name != name || len(st.entries) != 0 {
					t.Fatalf("bad new stream %+v", st)
				}
				want[name], keyOf[name] = st, h
			}
			for n, st := range want {
				if f, _ := x.find(keyOf[n], n); f != st {
					t.Fatalf("seed %d step %d: %s lost (chain of key %d)", seed, i, n, keyOf[n])
				}
			}
		}
		seen := map[string]int{}
		for st := range x.all {
			seen[st.name]++
		}
		if len(seen) != len(want) {
			t.Fatalf("all lists %d streams, want %d", len(seen), len(want))
		}
		for n, c := range seen {
			if c != 1 || want[n] == nil {
				t.Fatalf("all lists %s %d times", n, c)
			}
		}
	}
}
