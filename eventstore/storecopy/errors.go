package storecopy

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// ErrMismatch matches the error of a [Copy] whose verification pass found
// streams that differ between the source and the target; the
// Report's Verification lists them.
var ErrMismatch = errors.New("storecopy: the target differs from the source")

// ErrConflict matches every [*ConflictError].
var ErrConflict = errors.New("storecopy: the target stream holds other events")

// ConflictError reports a target stream that holds other events where the
// copy would append the source's: the copy stopped there, and appended
// nothing after it. It unwraps to the store's refusal (an
// *eventstore.WrongVersionError or *eventstore.EventIDConflictError).
type ConflictError struct {
	// Stream is the stream, Version the first version at which the target
	// differs from the source.
	Stream  string
	Version uint64
	// SourceID is the ID of the source's event at Version; TargetID that of
	// the target's, or the zero UUID when the target's stream ends before
	// Version.
	SourceID, TargetID uuid.UUID
	// Err is the append's refusal by the target.
	Err error
}

func (e *ConflictError) Error() string {
	if e.TargetID == (uuid.UUID{}) {
		return fmt.Sprintf("storecopy: stream %q of the target does not end at version %d, where the copy appends the source's event %s: %v",
			e.Stream, e.Version, e.SourceID, e.Err)
	}
	return fmt.Sprintf("storecopy: stream %q of the target holds another event at version %d (%s, the source's is %s): %v",
		e.Stream, e.Version, e.TargetID, e.SourceID, e.Err)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Unwrap returns the target's refusal.
func (e *ConflictError) Unwrap() error { return e.Err }

// ErrUnsupported matches every [*UnsupportedError].
var ErrUnsupported = errors.New("storecopy: a store cannot do what the copy was asked to")

// UnsupportedError reports a store that lacks an interface an option of
// [Options] needs: [Copy] then copies nothing.
type UnsupportedError struct {
	// Store is "source" or "target"; Type is its Go type.
	Store, Type string
	// Option is the option that needs it: "Consumers" or "Snapshots".
	Option string
	// Missing is the interface the store does not implement, as
	// "storekit.Catalog".
	Missing string
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("storecopy: Options.%s needs the %s to be a %s, which %s is not", e.Option, e.Store, e.Missing, e.Type)
}

// Is makes errors.Is(err, ErrUnsupported) true.
func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }

// ErrMissingEvent matches every [*MissingEventError].
var ErrMissingEvent = errors.New("storecopy: an event is not in the target")

// MissingEventError reports a source event that consumer state refers to
// (a checkpoint's event, a dead letter's) and that the target does not
// hold at its stream and version: appended to the source after the copy
// pass read it, or the target changed meanwhile. A rerun copies it.
type MissingEventError struct {
	Stream  string
	Version uint64
	// ID is the source event's.
	ID uuid.UUID
}

func (e *MissingEventError) Error() string {
	return fmt.Sprintf("the target does not hold event %s at version %d of stream %q (copied after the source's events were read? a rerun copies it)",
		e.ID, e.Version, e.Stream)
}

// Is makes errors.Is(err, ErrMissingEvent) true.
func (e *MissingEventError) Is(target error) bool { return target == ErrMissingEvent }

// ErrLeased matches every [*LeasedError].
var ErrLeased = errors.New("storecopy: a consumer runs on the target")

// LeasedError reports a consumer that holds a live lease in the target of
// a copy with Options.Consumers: it runs there, so its state there is its
// own, and the copy, which would move it back to the source's, copies
// nothing. Stop it and rerun the copy, or copy without Consumers.
type LeasedError struct {
	Consumer, Holder string
	// Expires is when the lease lapses unless renewed, by the target's
	// clock.
	Expires time.Time
}

func (e *LeasedError) Error() string {
	return fmt.Sprintf("storecopy: consumer %q runs on the target (%q holds its lease until %s): copying its state would move it back to the source's",
		e.Consumer, e.Holder, e.Expires.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrLeased) true.
func (e *LeasedError) Is(target error) bool { return target == ErrLeased }
