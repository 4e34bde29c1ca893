package storecopy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"iter"
	"maps"
	"slices"

	"github.com/cairn-es/cairn/eventstore"
)

// Verification is the result of the pass that compares the copied streams
// in both stores.
type Verification struct {
	// Streams counts the streams compared: every stream of the source
	// that has an event up to the last position copied.
	Streams int
	// Events counts the source events compared.
	Events int64
	// Mismatches lists the streams that differ, in the source's order.
	Mismatches []Mismatch
}

// Mismatch is a stream that differs between the source and the target.
type Mismatch struct {
	Stream string
	// Version is the first version at which the stream differs: an event
	// with another ID or content, or the end of one of the two.
	Version uint64
	// SourceEvents and TargetEvents count the stream's events in each
	// store (the source's up to the last position copied).
	SourceEvents, TargetEvents uint64
	// SourceDigest and TargetDigest are SHA-256 digests of the stream in
	// each store: of every event's ID, version, type, schema version,
	// data and metadata (its Extra keys sorted), in version order.
	SourceDigest, TargetDigest [sha256.Size]byte
}

// verify compares, stream by stream, the source up to position end with the
// target. Streams are found from their first event in the source's log, so
// that memory stays flat however many streams there are.
func verify(ctx context.Context, from, to eventstore.Store, end eventstore.Position) (Verification, error) {
	var v Verification
	for e, err := range from.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		if err != nil {
			return v, fmt.Errorf("storecopy: verify: read the source: %w", err)
		}
		if end.Before(e.Position) {
			break
		}
		if e.Version != 0 {
			continue
		}
		m, n, err := compareStream(ctx, from, to, e.StreamID, end)
		if err != nil {
			return v, err
		}
		v.Streams++
		v.Events += int64(n)
		if m != nil {
			v.Mismatches = append(v.Mismatches, *m)
		}
	}
	return v, nil
}

// side is one store's reading of a stream.
type side struct {
	next   func() (eventstore.Event, error, bool)
	stop   func()
	digest hash.Hash
	events uint64
	buf    []byte
}

func openSide(ctx context.Context, s eventstore.Store, stream string) *side {
	next, stop := iter.Pull2(s.ReadStream(ctx, stream, eventstore.Forward(0)))
	return &side{next: next, stop: stop, digest: sha256.New()}
}

// read returns the encoding of the side's next event, or false at the end
// of the stream (or at an event after end).
func (s *side) read(end *eventstore.Position, what, stream string) (bool, error) {
	e, err, ok := s.next()
	if ok && err != nil {
		return false, fmt.Errorf("storecopy: verify: read stream %q of the %s: %w", stream, what, err)
	}
	if !ok || end != nil && end.Before(e.Position) {
		return false, nil
	}
	s.buf = appendEvent(s.buf[:0], &e)
	s.digest.Write(s.buf)
	s.events++
	return true, nil
}

// compareStream compares one stream in both stores, and returns the
// mismatch, if any, and the number of the source's events.
func compareStream(ctx context.Context, from, to eventstore.Store, stream string, end eventstore.Position) (*Mismatch, uint64, error) {
	src, dst := openSide(ctx, from, stream), openSide(ctx, to, stream)
	defer src.stop()
	defer dst.stop()
	var first *uint64
	for {
		more, err := src.read(&end, "source", stream)
		if err != nil {
			return nil, 0, err
		}
		moreDst, err := dst.read(nil, "target", stream)
		if err != nil {
			return nil, 0, err
		}
		if first == nil && (more != moreDst || !bytes.Equal(src.buf, dst.buf)) {
			v := min(src.events, dst.events)
			if more && moreDst {
				v--
			}
			first = &v
		}
		if !more && !moreDst {
			break
		}
		if !more || !moreDst {
			// Count the rest of the longer one.
			rest, restEnd, what := dst, (*eventstore.Position)(nil), "target"
			if more {
				rest, restEnd, what = src, &end, "source"
			}
			for {
				ok, err := rest.read(restEnd, what, stream)
				if err != nil {
					return nil, 0, err
				}
				if !ok {
					break
				}
			}
			break
		}
	}
	if first == nil {
		return nil, src.events, nil
	}
	m := &Mismatch{Stream: stream, Version: *first, SourceEvents: src.events, TargetEvents: dst.events}
	src.digest.Sum(m.SourceDigest[:0])
	dst.digest.Sum(m.TargetDigest[:0])
	return m, src.events, nil
}

// appendEvent appends the encoding of what a copy keeps of e: its ID,
// version, type, schema version, data and metadata, each length-prefixed,
// the metadata's Extra keys sorted, so that equal events encode equally
// whichever store read them.
func appendEvent(b []byte, e *eventstore.Event) []byte {
	b = append(b, e.ID[:]...)
	b = binary.BigEndian.AppendUint64(b, e.Version)
	b = appendEventData(b, &e.EventData)
	return b
}

func appendEventData(b []byte, e *eventstore.EventData) []byte {
	b = appendString(b, e.Type)
	b = binary.BigEndian.AppendUint32(b, e.SchemaVersion)
	b = append(binary.AppendUvarint(b, uint64(len(e.Data))), e.Data...)
	md := &e.Metadata
	b = appendString(b, md.CorrelationID)
	b = appendString(b, md.CausationID)
	b = appendString(b, md.CommandID)
	b = binary.AppendUvarint(b, uint64(len(md.Extra)))
	for _, k := range slices.Sorted(maps.Keys(md.Extra)) {
		b = appendString(b, k)
		b = appendString(b, md.Extra[k])
	}
	return b
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// sameEvent reports whether a and b are the same event to a copy: same ID
// and content.
func sameEvent(a, b *eventstore.EventData) bool {
	return a.ID == b.ID && bytes.Equal(appendEventData(nil, a), appendEventData(nil, b))
}
