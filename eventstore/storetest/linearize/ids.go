package linearize

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"

	"github.com/google/uuid"
)

// idSpace makes the event IDs of one history. Each ID carries an ordinal
// (1, 2, 3, ...) in its last six bytes, so the model can compare small
// integers instead of UUIDs, and a random prefix in the rest, so that two
// histories on one shared server (or the same seed run twice) never share
// an ID. A read that yields an ID without the prefix maps it to ordinal 0,
// which no append uses: the model then rejects that read.
type idSpace struct {
	template uuid.UUID // random, with the version 4 and variant bits set
}

// newIDSpace returns a space with a fresh random prefix.
func newIDSpace() (idSpace, error) {
	var s idSpace
	if _, err := rand.Read(s.template[:]); err != nil {
		return s, fmt.Errorf("linearize: read random bytes for event IDs: %w", err)
	}
	s.template[6] = s.template[6]&0x0f | 0x40 // version 4
	s.template[8] = s.template[8]&0x3f | 0x80 // RFC 4122 variant
	return s, nil
}

// maxOrdinal is the largest ordinal that fits in an ID's last six bytes.
const maxOrdinal = 1<<48 - 1

// id returns the event ID of ordinal n (1 <= n <= maxOrdinal).
func (s idSpace) id(n uint64) uuid.UUID {
	id := s.template
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	copy(id[10:], b[2:])
	return id
}

// ordinal returns the ordinal that id carries, or 0 when it is not an ID of
// this space.
func (s idSpace) ordinal(id uuid.UUID) uint64 {
	if [10]byte(id[:10]) != [10]byte(s.template[:10]) {
		return 0
	}
	var b [8]byte
	copy(b[2:], id[10:])
	return binary.BigEndian.Uint64(b[:])
}
