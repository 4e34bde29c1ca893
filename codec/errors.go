package codec

import (
	"errors"
	"fmt"

	"github.com/cairn-es/cairn/eventstore"
)

// Read-time errors: a [*DecodeError] matches one of these with errors.Is.
var (
	// ErrUnknownType: no registered type and no upcaster has this name.
	ErrUnknownType = errors.New("unknown event type")
	// ErrVersionTooNew: the stored schema version is newer than the code
	// knows, as when old code reads what a newer deployment wrote.
	ErrVersionTooNew = errors.New("schema version newer than the code knows")
	// ErrNoUpcastPath: the stored (type, version) cannot be brought to a
	// registered type and version. For a snapshot or saga state, it also
	// means the chain dropped or split the value: discard it and replay.
	ErrNoUpcastPath = errors.New("no upcast path to a registered type and version")
	// ErrUndecodable: the serializer could not read the (upcast) data into
	// the registered Go type.
	ErrUndecodable = errors.New("undecodable event data")
	// ErrUpcastFailed: an upcaster step failed on this event; the cause is
	// an [*upcast.StepError].
	ErrUpcastFailed = errors.New("upcast failed")
	// ErrUnexpectedType: [DecodeValueAs] decoded a value of another Go type
	// than the one asked for.
	ErrUnexpectedType = errors.New("decoded value has an unexpected Go type")
)

// Set-up and encode errors.
var (
	// ErrInvalidRegistration matches every [*RegistrationError].
	ErrInvalidRegistration = errors.New("invalid type registration")
	// ErrInvalidSetup matches the error of [Registry.Validate], and of every
	// later call, when the registrations or upcasters are invalid. The
	// joined problems match their own sentinels too ([ErrInvalidRegistration],
	// upcast.ErrGap, upcast.ErrCycle, ...).
	ErrInvalidSetup = errors.New("codec: invalid registry set-up")
	// ErrFrozen: a registration or upcaster was added after the registry
	// was validated, by an explicit Validate or by its first use.
	ErrFrozen = errors.New("codec: registry is in use and can no longer change")
	// ErrUnregisteredType matches an [*EncodeError] for a Go type that was
	// never registered.
	ErrUnregisteredType = errors.New("unregistered Go type")
	// ErrNilValue matches an [*EncodeError] for a nil value: a nil pointer
	// to a registered type, or nil itself (which also matches
	// ErrUnregisteredType).
	ErrNilValue = errors.New("nil value")
)

// DecodeError reports a stored event, or a stored value, that could not be
// decoded. It names where the event is and what it was stored as, and
// unwraps to one of the read-time sentinels and to its cause.
type DecodeError struct {
	// Stream, Version and Position locate the stored event; Stream is
	// empty for a value decoded with [Registry.DecodeValue].
	Stream   string
	Version  uint64
	Position eventstore.Position
	// Snapshot reports that the value was the snapshot of Stream after
	// the event at Version (see [DecodeSnapshot]); Position is then zero.
	Snapshot bool
	// Type and SchemaVersion are as stored, before upcasting.
	Type          string
	SchemaVersion uint32
	// Err matches a sentinel (ErrUnknownType, ErrVersionTooNew,
	// ErrNoUpcastPath, ErrUndecodable, ErrUpcastFailed, ErrUnexpectedType)
	// and wraps the cause.
	Err error
}

// Error names the stream, version, position, stored type and schema
// version, and the cause.
func (e *DecodeError) Error() string {
	switch {
	case e.Snapshot:
		return fmt.Sprintf("decode snapshot of stream %q at version %d, type %q v%d: %v",
			e.Stream, e.Version, e.Type, e.SchemaVersion, e.Err)
	case e.Stream == "":
		return fmt.Sprintf("decode value of type %q v%d: %v", e.Type, e.SchemaVersion, e.Err)
	}
	return fmt.Sprintf("decode event of stream %q at version %d (position %s), type %q v%d: %v",
		e.Stream, e.Version, e.Position, e.Type, e.SchemaVersion, e.Err)
}

// Unwrap returns Err.
func (e *DecodeError) Unwrap() error { return e.Err }

// RegistrationError reports a rejected [Register] call.
type RegistrationError struct {
	// Name and Version are as given to Register.
	Name    string
	Version uint32
	// GoType is the Go type being registered, as %T prints it.
	GoType string
	// Reason says what is wrong.
	Reason string
}

// Error names the Go type, the name and version, and the reason.
func (e *RegistrationError) Error() string {
	return fmt.Sprintf("%v: %s as %q v%d: %s", ErrInvalidRegistration, e.GoType, e.Name, e.Version, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidRegistration) true.
func (e *RegistrationError) Is(target error) bool { return target == ErrInvalidRegistration }

// EncodeError reports a value that could not be encoded.
type EncodeError struct {
	// GoType is the value's Go type, as %T prints it.
	GoType string
	// Name and Version are the registered type name and version, when the
	// Go type is registered.
	Name    string
	Version uint32
	// Err is ErrUnregisteredType or the serializer's error.
	Err error
}

// Error names the Go type and, when registered, its name and version.
func (e *EncodeError) Error() string {
	if e.Name == "" {
		return fmt.Sprintf("encode %s: %v", e.GoType, e.Err)
	}
	return fmt.Sprintf("encode %s as %q v%d: %v", e.GoType, e.Name, e.Version, e.Err)
}

// Unwrap returns Err.
func (e *EncodeError) Unwrap() error { return e.Err }
