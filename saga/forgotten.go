package saga

import (
	"context"
	"slices"
	"sync"

	"github.com/cairn-es/cairn/eventstore"
)

// forgottenTypes are the stored event types that a saga read before and
// that its current code does not read at all (see checkSubscription).
type forgottenTypes struct {
	mu    sync.Mutex
	found []string
}

// add records names as forgotten, each once.
func (f *forgottenTypes) add(names ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range names {
		if !slices.Contains(f.found, n) {
			f.found = append(f.found, n)
		}
	}
	slices.Sort(f.found)
}

// list returns the forgotten types found so far, sorted.
func (f *forgottenTypes) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.found)
}

// recordedTypes returns the stored event types that the saga's step
// records took in, hold or are parked on, sorted: what a saga whose
// runners predate the subscription record read. A record that cannot be
// read is passed over here; the scans report it.
func (r *Runner[S]) recordedTypes(ctx context.Context) ([]string, error) {
	var types []string
	f := eventstore.Filter{Types: []string{recordType}, StreamPrefixes: []string{r.e.t.Category()}}
	for ev, err := range r.e.store.ReadAll(ctx, eventstore.Start, f) {
		if err != nil {
			return nil, err
		}
		rec, err := decodeOutline(ev)
		if err != nil {
			continue
		}
		for _, m := range storedMessagesOf(rec) {
			if !slices.Contains(types, m.Type) {
				types = append(types, m.Type)
			}
		}
	}
	slices.Sort(types)
	return types, nil
}

// storedMessagesOf returns the stored events record rec refers to: the one
// its step took, the one it is parked on, and those it holds.
func storedMessagesOf(rec *record) []envelope {
	var out []envelope
	stored := func(m envelope) {
		if m.kind() == kindEvent && m.Ordered && m.Type != "" {
			out = append(out, m)
		}
	}
	stored(rec.Handled.Message)
	if rec.Parked != nil {
		stored(rec.Parked.Message)
	}
	for _, h := range rec.Held {
		stored(h)
	}
	return out
}
