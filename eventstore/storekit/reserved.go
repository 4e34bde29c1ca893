package storekit

import (
	"context"
	"fmt"
	"strings"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/clip"
	"github.com/cairn-es/cairn/internal/trusted"
)

// Names only Cairn's own writers may append. A record of these kinds is
// believed by the code that reads it: a saga dispatches the commands its
// step records name, and the command bus answers a command whose
// rejection is recorded with that rejection. So every store refuses them
// from any other caller of Append (see [PrepareAppend]).
const (
	// ReservedTypePrefix starts the type names of the records Cairn
	// writes for itself (a saga's steps, an aggregate's recorded
	// rejections), and the metadata keys it sets (the command type); the
	// codec registers no type under it (codec.ReservedPrefix).
	ReservedTypePrefix = "cairn."
	// ReservedStreamPrefix starts the streams of saga instances
	// (saga.StreamPrefix).
	ReservedStreamPrefix = "saga:"
)

// checkReserved refuses, unless ctx is an append of Cairn's own, a stream
// or an event type or metadata key that only Cairn may write.
func checkReserved(ctx context.Context, stream string, events []eventstore.EventData) error {
	if trusted.IsWriter(ctx) {
		return nil
	}
	if strings.HasPrefix(stream, ReservedStreamPrefix) {
		return &eventstore.InvalidArgumentError{Stream: stream, Index: -1, Field: "stream",
			Reason: fmt.Sprintf("starts with %q: saga instance streams are written by their runners only", ReservedStreamPrefix)}
	}
	for i := range events {
		e := &events[i]
		if strings.HasPrefix(e.Type, ReservedTypePrefix) {
			return &eventstore.InvalidArgumentError{Stream: stream, Index: i, Field: "type",
				Reason: fmt.Sprintf("%s starts with %q, which is reserved for the records Cairn writes itself", clip.Quote(e.Type), ReservedTypePrefix)}
		}
		if len(e.Metadata.Extra) == 0 {
			continue // most events have none: ranging over nil zeroes an iterator
		}
		// The least reserved key, so that one input gets one message,
		// without sorting every append's keys.
		reserved := ""
		for k := range e.Metadata.Extra {
			if strings.HasPrefix(k, ReservedTypePrefix) && (reserved == "" || k < reserved) {
				reserved = k
			}
		}
		if reserved != "" {
			return &eventstore.InvalidArgumentError{Stream: stream, Index: i, Field: "metadata",
				Reason: fmt.Sprintf("key %s starts with %q, which is reserved for the metadata Cairn sets itself", clip.Quote(reserved), ReservedTypePrefix)}
		}
	}
	return nil
}
