package memory

import (
	"context"
	"sync"
	"time"

	"github.com/cairn-es/cairn/eventstore"
)

// SnapshotStore is an in-memory [eventstore.SnapshotStore]: the latest
// snapshot of each stream, lost when the process ends. It is a separate
// value from [Store] so that a test can give a bus snapshots or not, and
// drop them, independently of the events.
type SnapshotStore struct {
	mu    sync.RWMutex
	snaps map[string]eventstore.Snapshot
	now   func() time.Time
}

// NewSnapshotStore returns an empty snapshot store.
func NewSnapshotStore() *SnapshotStore {
	return &SnapshotStore{
		snaps: make(map[string]eventstore.Snapshot),
		now:   func() time.Time { return time.Now().UTC() },
	}
}

var _ eventstore.SnapshotStore = (*SnapshotStore)(nil)

// SaveSnapshot implements [eventstore.SnapshotStore.SaveSnapshot].
func (s *SnapshotStore) SaveSnapshot(ctx context.Context, snap eventstore.Snapshot) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := eventstore.ValidateSnapshot(snap); err != nil {
		return err
	}
	snap.Data = append(make([]byte, 0, len(snap.Data)), snap.Data...)
	snap.RecordedAt = s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snaps[snap.Stream] = snap
	return nil
}

// LoadSnapshot implements [eventstore.SnapshotStore.LoadSnapshot].
func (s *SnapshotStore) LoadSnapshot(ctx context.Context, stream string) (eventstore.Snapshot, bool, error) {
	if err := ctx.Err(); err != nil {
		return eventstore.Snapshot{}, false, err
	}
	if err := eventstore.ValidateStream(stream); err != nil {
		return eventstore.Snapshot{}, false, err
	}
	s.mu.RLock()
	snap, ok := s.snaps[stream]
	s.mu.RUnlock()
	if !ok {
		return eventstore.Snapshot{}, false, nil
	}
	snap.Data = append(make([]byte, 0, len(snap.Data)), snap.Data...)
	return snap, true, nil
}
