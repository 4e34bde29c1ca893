package projection

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
)

// Handler applies one decoded event. It may run more than once for the same
// event (after a crash, or a retry), so its effect should be idempotent, or
// the consumer transactional.
type Handler func(ctx context.Context, d codec.Decoded) error

// TxHandler applies one decoded event inside tx, the transaction that also
// moves the consumer's checkpoint.
type TxHandler[Tx any] func(ctx context.Context, tx Tx, d codec.Decoded) error

// Typed returns a Handler that calls fn for values of type T and ignores
// every other value, so that handlers need no type assertion.
func Typed[T any](fn func(ctx context.Context, v T, d codec.Decoded) error) Handler {
	return func(ctx context.Context, d codec.Decoded) error {
		if v, ok := d.Value.(T); ok {
			return fn(ctx, v, d)
		}
		return nil
	}
}

// TypedTx is [Typed] for a [TxHandler].
func TypedTx[Tx, T any](fn func(ctx context.Context, tx Tx, v T, d codec.Decoded) error) TxHandler[Tx] {
	return func(ctx context.Context, tx Tx, d codec.Decoded) error {
		if v, ok := d.Value.(T); ok {
			return fn(ctx, tx, v, d)
		}
		return nil
	}
}

// whileLive wraps h so that it is not called once ctx has ended. The
// consumer ends ctx when its lease is about to lapse, and from then on no
// event may start being handled, not even the rest of a batch: another
// process may soon hold the lease.
func whileLive(h Handler) Handler {
	return func(ctx context.Context, d codec.Decoded) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return h(ctx, d)
	}
}

// whileLiveTx is [whileLive] for a [TxHandler].
func whileLiveTx[Tx any](h TxHandler[Tx]) TxHandler[Tx] {
	return func(ctx context.Context, tx Tx, d codec.Decoded) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return h(ctx, tx, d)
	}
}

// ErrHandlerFailed matches every [*HandlerError].
var ErrHandlerFailed = errors.New("projection: handler failed")

// HandlerError reports an event that a consumer's handler failed on after
// every retry, when the consumer is set to stop ([Stop]) or has no dead
// letter store, or a dead letter whose retry failed. It unwraps to the
// handler's last error (a [*PanicError] when it panicked, or the decoding
// error).
type HandlerError struct {
	Consumer string
	// Stream, Version, Position and Type locate the stored event, as stored
	// (before upcasting).
	Stream   string
	Version  uint64
	Position eventstore.Position
	Type     string
	// Part is the failing value's index among those the event decodes to.
	Part     int
	Attempts int
	Err      error
}

func (e *HandlerError) Error() string {
	return fmt.Sprintf("consumer %q: event %d of stream %q (type %q, position %s, part %d) failed after %d attempts: %v",
		e.Consumer, e.Version, e.Stream, e.Type, e.Position, e.Part, e.Attempts, e.Err)
}

// Is makes errors.Is(err, ErrHandlerFailed) true.
func (e *HandlerError) Is(target error) bool { return target == ErrHandlerFailed }

// Unwrap returns the handler's error.
func (e *HandlerError) Unwrap() error { return e.Err }

// partError carries a handler failure out of a transaction, with the index
// of the failing unit and part, so the consumer can tell it from a store
// error.
type partError struct {
	unit, part int
	err        error
}

func (e *partError) Error() string { return e.err.Error() }
func (e *partError) Unwrap() error { return e.err }
