package saga

import (
	"context"

	"github.com/cairn-es/cairn/eventstore"
)

// SendRecords dispatches the commands of every step record of instance id,
// as the outbox does, for tests that drive the outbox by hand.
func (r *Runner[S]) SendRecords(ctx context.Context, id string) error {
	for ev, err := range r.e.store.ReadStream(ctx, r.e.t.Stream(id), eventstore.Forward(0)) {
		if err != nil {
			return err
		}
		rec, err := decodeRecord(ev)
		if err != nil {
			return err
		}
		if err := r.send(ctx, ev, rec); err != nil {
			return err
		}
	}
	return nil
}

// SendStored is the outbox step that harnesses reach through
// internal/sagaharness, for tests that play the outbox by hand.
func (r *Runner[S]) SendStored(ctx context.Context, ev eventstore.Event) error {
	return r.sendStored(ctx, ev)
}
