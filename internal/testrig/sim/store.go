package sim

import (
	"context"
	"fmt"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// faultStore is the event store as the code under test sees it: the
// memory store, which survives every crash of the simulated process, with
// appends that fail at random before they write or after.
type faultStore struct {
	*memory.Store
	inj *injector
	// advance, when set, moves the clock after each append that wrote, so
	// that no two steps share an instant even when one call (a catch-up, a
	// drain) stores many: the deadlines they set never tie, and the order
	// of tied deadlines (a map's, in the runner's index) never decides a
	// run.
	advance func()
}

var (
	_ eventstore.Store      = (*faultStore)(nil)
	_ storekit.CommandIndex = (*faultStore)(nil)
)

// Append fails before the write (nothing is stored) or after it (the
// events are stored and the caller hears an error, as when the connection
// breaks before the acknowledgement).
func (s *faultStore) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	if f, _ := s.inj.fault(AppendBefore); f {
		return eventstore.AppendResult{}, fmt.Errorf("%w: appending to %q failed before the write", ErrInjected, stream)
	}
	res, err := s.Store.Append(ctx, stream, expected, events...)
	if err != nil {
		return res, err
	}
	if s.advance != nil {
		s.advance()
	}
	if f, _ := s.inj.fault(AppendAfter); f {
		return eventstore.AppendResult{}, fmt.Errorf("%w: appending to %q failed after the write", ErrInjected, stream)
	}
	return res, nil
}

// faultCheckpoints keeps the checkpoints of the simulated consumers (the
// delivery bridge and the outbox dispatcher), whose saves fail at random
// before or after the write.
type faultCheckpoints struct {
	*memory.Store
	inj *injector
}

var _ storekit.CheckpointStore = (*faultCheckpoints)(nil)

// SaveCheckpoint fails before or after the write.
func (c *faultCheckpoints) SaveCheckpoint(ctx context.Context, name string, expected, next eventstore.Position, fence storekit.Fence) error {
	if f, _ := c.inj.fault(CheckpointBefore); f {
		return fmt.Errorf("%w: saving checkpoint %q failed before the write", ErrInjected, name)
	}
	if err := c.Store.SaveCheckpoint(ctx, name, expected, next, fence); err != nil {
		return err
	}
	if f, _ := c.inj.fault(CheckpointAfter); f {
		return fmt.Errorf("%w: saving checkpoint %q failed after the write", ErrInjected, name)
	}
	return nil
}
