package memory

import (
	"context"
	"sync"
	"time"

	"github.com/cairn-es/cairn/eventstore/storekit"
)

// snapshots is the part of [Store] that keeps the latest snapshot of each
// stream, under a lock of its own.
type snapshots struct {
	closing
	mu    sync.RWMutex
	snaps map[string]storekit.Snapshot
	now   func() time.Time
}

func (s *snapshots) init(done <-chan struct{}) {
	*s = snapshots{
		closing: closing{done},
		snaps:   make(map[string]storekit.Snapshot),
		now:     func() time.Time { return time.Now().UTC() },
	}
}

// SaveSnapshot implements [storekit.SnapshotStore.SaveSnapshot].
func (s *snapshots) SaveSnapshot(ctx context.Context, snap storekit.Snapshot) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	if err := storekit.ValidateSnapshot(snap); err != nil {
		return err
	}
	snap.Data = append(make([]byte, 0, len(snap.Data)), snap.Data...)
	snap.RecordedAt = s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snaps[snap.Stream] = snap
	return nil
}

// LoadSnapshot implements [storekit.SnapshotStore.LoadSnapshot].
func (s *snapshots) LoadSnapshot(ctx context.Context, stream string) (storekit.Snapshot, bool, error) {
	if err := s.usable(ctx); err != nil {
		return storekit.Snapshot{}, false, err
	}
	if err := storekit.ValidateStream(stream); err != nil {
		return storekit.Snapshot{}, false, err
	}
	s.mu.RLock()
	snap, ok := s.snaps[stream]
	s.mu.RUnlock()
	if !ok {
		return storekit.Snapshot{}, false, nil
	}
	snap.Data = append(make([]byte, 0, len(snap.Data)), snap.Data...)
	return snap, true, nil
}
