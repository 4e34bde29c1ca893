package eventstore

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
)

// Position is the global position of an event: its place in the order in
// which subscribers see all events of a store.
//
// It is a pair of unsigned numbers compared lexicographically, so that every
// backend can express its native order without loss: KurrentDB's
// (commit, prepare) pair, PostgreSQL's (transaction ID, sequence), or a dense
// sequence (Major only) in memory and SQLite.
//
// The zero Position is the start of the store: no event has it, and reading
// or subscribing after it yields every event.
type Position struct {
	Major uint64
	Minor uint64
}

// Start is the position before the first event of every store.
var Start = Position{}

// Compare returns -1, 0 or +1 as p is before, equal to or after q.
func (p Position) Compare(q Position) int {
	if c := cmp.Compare(p.Major, q.Major); c != 0 {
		return c
	}
	return cmp.Compare(p.Minor, q.Minor)
}

// Before reports whether p comes before q.
func (p Position) Before(q Position) bool { return p.Compare(q) < 0 }

// IsZero reports whether p is the start position.
func (p Position) IsZero() bool { return p == Position{} }

// String returns the stable text form "major:minor", used in logs and by
// checkpoint stores. [ParsePosition] reads it back.
func (p Position) String() string {
	return strconv.FormatUint(p.Major, 10) + ":" + strconv.FormatUint(p.Minor, 10)
}

// MarshalText implements [encoding.TextMarshaler] with the form of [Position.String].
func (p Position) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText implements [encoding.TextUnmarshaler].
func (p *Position) UnmarshalText(text []byte) error {
	q, err := ParsePosition(string(text))
	if err != nil {
		return err
	}
	*p = q
	return nil
}

// ParsePosition parses the text form written by [Position.String].
func ParsePosition(s string) (Position, error) {
	major, minor, ok := strings.Cut(s, ":")
	if !ok {
		return Position{}, fmt.Errorf("%w: position %q: want \"major:minor\"", ErrInvalidArgument, s)
	}
	hi, err := strconv.ParseUint(major, 10, 64)
	if err != nil {
		return Position{}, fmt.Errorf("%w: position %q: major part: %v", ErrInvalidArgument, s, err)
	}
	lo, err := strconv.ParseUint(minor, 10, 64)
	if err != nil {
		return Position{}, fmt.Errorf("%w: position %q: minor part: %v", ErrInvalidArgument, s, err)
	}
	return Position{Major: hi, Minor: lo}, nil
}
