// Package batchconsumer is the door from Cairn's components to the
// checkpointed consumer loop of package projection in its batch form: a
// consumer that hands whole batches of stored events, undecoded, to a
// component that handles them its own way (a saga runner steps the
// instances of a batch in parallel), and tells it when a session has
// claimed its checkpoint. Users write projections with projection.New and
// projection.NewTx; this form is not theirs, so it stays out of the
// projection package's API.
//
// Package projection registers its constructor when it is initialised;
// any package that names *projection.Consumer has it linked in.
package batchconsumer

import (
	"context"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// Handler handles a batch of stored events, in position order, as they
// are stored (nothing is decoded for it). The checkpoint moves past the
// batch only after it returns nil. An error fails the whole batch, which is
// handled again, so a Handler must be idempotent; it keeps its own account
// of events that fail alone (a saga parks them in the instance they belong
// to).
type Handler func(ctx context.Context, events []eventstore.Event) error

// OnClaim is called at the start of each session of the consumer's Run and
// CatchUp: once it holds its lease (if any) and has claimed the checkpoint
// under the lease's fence, before the first event, with the position it
// resumes after. ctx ends with the session. An error ends the session as a
// store's would. It lets a component that keeps state beside the
// checkpoint (a saga runner's deadline index) read what a former holder of
// the lease changed up to that checkpoint.
type OnClaim func(ctx context.Context, from eventstore.Position) error

// newBatch is projection's constructor, a func(name string, events
// eventstore.Store, checkpoints storekit.CheckpointStore, h Handler,
// onClaim OnClaim, opts projection.Options) (*projection.Consumer, error).
var newBatch any

// Register is called by package projection with its constructor.
func Register[C, O any](f func(name string, events eventstore.Store, checkpoints storekit.CheckpointStore, h Handler, onClaim OnClaim, opts O) (C, error)) {
	newBatch = f
}

// New returns a consumer (a *projection.Consumer, C) that hands h each
// batch of the events that opts (projection.Options, O) filters, keeps its
// checkpoint in checkpoints under name, and calls onClaim, when not nil,
// at the start of each session. A live event is handed over as soon as no
// further one is waiting, rather than after opts.MaxBatchDelay.
//
// A batch that fails is retried with opts.Retry; when its attempts run
// out, Run and CatchUp return a *projection.HandlerError naming the
// batch's first event. opts.OnFailure and opts.DeadLetters do not apply.
func New[C, O any](name string, events eventstore.Store, checkpoints storekit.CheckpointStore, h Handler, onClaim OnClaim, opts O) (C, error) {
	return newBatch.(func(string, eventstore.Store, storekit.CheckpointStore, Handler, OnClaim, O) (C, error))(name, events, checkpoints, h, onClaim, opts)
}
