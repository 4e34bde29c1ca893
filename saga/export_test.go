package saga

import (
	"context"
	"time"

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

// ObserveGauges registers the runner's gauge callback as Run does, for
// tests that read the gauges of a runner driven by hand; call the result
// to unregister it.
func (r *Runner[S]) ObserveGauges() (done func()) { return r.observeGauges() }

// SetUnsentRefresh sets how long a count of the unsent commands is kept;
// negative reads the store at every collection.
func (r *Runner[S]) SetUnsentRefresh(d time.Duration) {
	r.unsentCount.mu.Lock()
	defer r.unsentCount.mu.Unlock()
	r.unsentCount.refresh, r.unsentCount.known, r.unsentCount.at = d, false, time.Time{}
}
