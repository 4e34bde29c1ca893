package memory

import (
	"cmp"
	"context"
	"iter"
	"slices"
	"strings"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

var _ storekit.Catalog = (*Store)(nil)

// A memory store keeps its streams, consumers and snapshots in maps, which
// have no order: each listing copies what it lists under the lock and
// sorts it, so that the caller ranges over a copy and may write to the
// store as it goes. Its cost grows with what it lists, which a store meant
// for tests can afford.

// Streams implements [storekit.Catalog.Streams].
func (s *Store) Streams(ctx context.Context, prefix, after string) iter.Seq2[storekit.StreamInfo, error] {
	return storekit.ListSeq(func() ([]storekit.StreamInfo, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s.mu.RLock()
		defer s.mu.RUnlock()
		if s.closed {
			return nil, eventstore.ErrClosed
		}
		var out []storekit.StreamInfo
		for st := range s.streams.all {
			name := st.name
			if name <= after || !strings.HasPrefix(name, prefix) || len(st.entries) == 0 {
				continue
			}
			last := len(st.entries) - 1
			out = append(out, storekit.StreamInfo{Name: name, LastVersion: uint64(last), LastPosition: s.log.at(st.entries[last]).Position})
		}
		slices.SortFunc(out, func(a, b storekit.StreamInfo) int { return strings.Compare(a.Name, b.Name) })
		return out, nil
	})
}

// Consumers implements [storekit.Catalog.Consumers].
func (c *consumers) Consumers(ctx context.Context) iter.Seq2[storekit.ConsumerInfo, error] {
	return storekit.ListSeq(func() ([]storekit.ConsumerInfo, error) {
		if err := c.usable(ctx); err != nil {
			return nil, err
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		infos := make(map[string]*storekit.ConsumerInfo)
		info := func(name string) *storekit.ConsumerInfo {
			if infos[name] == nil {
				infos[name] = &storekit.ConsumerInfo{Name: name}
			}
			return infos[name]
		}
		for name, cp := range c.checkpoints {
			i := info(name)
			i.Checkpoint, i.HasCheckpoint = cp, true
		}
		for name, l := range c.leases {
			i := info(name)
			i.Lease, i.HasLease = l, true
		}
		for name, letters := range c.dead {
			if len(letters) == 0 {
				continue // deleting the last letter leaves the map
			}
			i := info(name)
			i.DeadLetters = len(letters)
			for _, d := range letters {
				if i.OldestDeadLetter.IsZero() || d.FirstFailure.Before(i.OldestDeadLetter) {
					i.OldestDeadLetter = d.FirstFailure
				}
			}
		}
		out := make([]storekit.ConsumerInfo, 0, len(infos))
		for _, i := range infos {
			out = append(out, *i)
		}
		slices.SortFunc(out, func(a, b storekit.ConsumerInfo) int { return strings.Compare(a.Name, b.Name) })
		return out, nil
	})
}

// Snapshots implements [storekit.Catalog.Snapshots].
func (s *snapshots) Snapshots(ctx context.Context, after string) iter.Seq2[storekit.Snapshot, error] {
	return storekit.ListSeq(func() ([]storekit.Snapshot, error) {
		if err := s.usable(ctx); err != nil {
			return nil, err
		}
		s.mu.RLock()
		defer s.mu.RUnlock()
		var out []storekit.Snapshot
		for stream, snap := range s.snaps {
			if stream > after {
				snap.Data = append(make([]byte, 0, len(snap.Data)), snap.Data...)
				out = append(out, snap)
			}
		}
		slices.SortFunc(out, func(a, b storekit.Snapshot) int { return cmp.Compare(a.Stream, b.Stream) })
		return out, nil
	})
}

var _ storekit.Described = (*Store)(nil)

// Kind implements [storekit.Described]: memory has no schema.
func (s *Store) Kind() (string, int) { return "memory", 0 }
