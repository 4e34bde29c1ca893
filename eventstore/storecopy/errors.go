package storecopy

import (
	"errors"
	"fmt"

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
