// Package sagaharness is what Cairn's harnesses (internal/sim) do to a
// saga runner beside its API: play its outbox by hand, sending one stored
// step record at a time, so that they can crash, delay or repeat the
// outbox at chosen points. Package saga registers it when it is
// initialised.
package sagaharness

import (
	"context"

	"github.com/cairn-es/cairn/eventstore"
)

// sendStored is saga's outbox step on a *saga.Runner[S].
var sendStored func(runner any) func(ctx context.Context, ev eventstore.Event) error

// Register is called by package saga.
func Register(f func(runner any) func(ctx context.Context, ev eventstore.Event) error) {
	sendStored = f
}

// SendStored returns the outbox step of runner (a *saga.Runner[S]): for
// one stored step record of its saga type, it does what the runner's
// outbox does. It tells the runner's indexes (deadlines, gaps) what the
// record leaves pending, then sends the record's commands through the bus
// with their recorded IDs (a re-send is absorbed by the bus; a rejection
// is fed back to the instance once). Records may be sent again, and each
// instance's should be sent in their stream order, as the runner's outbox
// sends them. An event that is not a step record of the runner's saga type
// is an *eventstore.InvalidArgumentError.
func SendStored(runner any) func(ctx context.Context, ev eventstore.Event) error {
	return sendStored(runner)
}
