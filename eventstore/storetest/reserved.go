package storetest

import (
	"context"
	"testing"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/check"
	"github.com/cairn-es/cairn/internal/trusted"
)

// testReservedNames: the records Cairn believes (saga step records in saga
// streams, an aggregate's recorded rejections, Cairn's metadata) are
// refused from any caller of Append but Cairn's own writers: a forged
// rejection would make the bus refuse a real command, a forged step record
// make a saga dispatch a command no handler decided. Nothing is written.
// Cairn's writers, whose appends carry the internal mark, are not refused.
func testReservedNames(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	ctx := context.Background()
	saga := storekit.ReservedStreamPrefix + n.stream("forged")
	reservedType := event(storekit.ReservedTypePrefix+"command-rejected", "forged")
	reservedKey := event("x", "ok")
	reservedKey.Metadata.Extra = map[string]string{"k": "v", storekit.ReservedTypePrefix + "command": "Charge"}
	for _, c := range []struct {
		name, stream string
		event        eventstore.EventData
		field        string
		index        int
	}{
		{"saga stream", saga, event("x", "ok"), "stream", -1},
		{"reserved type", n.stream("rejected"), reservedType, "type", 1},
		{"reserved metadata key", n.stream("meta"), reservedKey, "metadata", 1},
	} {
		_, err := s.Append(ctx, c.stream, eventstore.Any, event("x", "ok"), c.event)
		bad := check.Invalid(t, err, c.field, c.name)
		check.Equal(t, bad.Index, c.index, c.name)
		check.Equal(t, bad.Stream, c.stream, c.name)
	}
	requireNothingWritten(t, s, n, "every append wrote a name only Cairn may")
	for ev, err := range s.ReadStream(ctx, saga, eventstore.Forward(0)) {
		check.NoError(t, err)
		t.Fatalf("the refused append to saga stream %q wrote %s#%d", saga, ev.StreamID, ev.Version)
	}

	own := trusted.Writer(ctx)
	_, err := s.Append(own, saga, eventstore.NoStream, event("x", "ok"))
	check.NoError(t, err, "Cairn's own append to a saga stream")
	_, err = s.Append(own, n.stream("rejected"), eventstore.NoStream, reservedType, reservedKey)
	check.NoError(t, err, "Cairn's own append of a reserved type and metadata key")
}
