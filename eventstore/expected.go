package eventstore

import "strconv"

// ExpectedVersion is the state a stream must be in for an append to
// proceed: the optimistic concurrency check of [Store.Append].
//
// The zero value is [Any].
type ExpectedVersion struct {
	kind    expectKind
	version uint64
}

type expectKind uint8

const (
	expectAny expectKind = iota
	expectNoStream
	expectStreamExists
	expectExact
)

var (
	// Any appends whatever state the stream is in.
	Any = ExpectedVersion{}
	// NoStream appends only to a stream that has no events yet.
	NoStream = ExpectedVersion{kind: expectNoStream}
	// StreamExists appends only to a stream that has at least one event.
	StreamExists = ExpectedVersion{kind: expectStreamExists}
)

// Exact appends only when the stream's last event has version v.
func Exact(v uint64) ExpectedVersion { return ExpectedVersion{kind: expectExact, version: v} }

// Version returns the exact version and true, or 0 and false when e is
// not an exact version.
func (e ExpectedVersion) Version() (uint64, bool) {
	return e.version, e.kind == expectExact
}

// IsAny reports whether e accepts every stream state.
func (e ExpectedVersion) IsAny() bool { return e.kind == expectAny }

// IsNoStream reports whether e requires the stream to be empty.
func (e ExpectedVersion) IsNoStream() bool { return e.kind == expectNoStream }

// IsStreamExists reports whether e requires the stream to have events.
func (e ExpectedVersion) IsStreamExists() bool { return e.kind == expectStreamExists }

// Matches reports whether a stream whose last event has version last (or
// that has no events, when exists is false) satisfies e.
func (e ExpectedVersion) Matches(last uint64, exists bool) bool {
	switch e.kind {
	case expectNoStream:
		return !exists
	case expectStreamExists:
		return exists
	case expectExact:
		return exists && last == e.version
	default:
		return true
	}
}

// String returns "any", "no stream", "stream exists" or the exact version.
func (e ExpectedVersion) String() string {
	switch e.kind {
	case expectNoStream:
		return "no stream"
	case expectStreamExists:
		return "stream exists"
	case expectExact:
		return strconv.FormatUint(e.version, 10)
	default:
		return "any"
	}
}
