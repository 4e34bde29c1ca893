package storetest

import (
	"context"
	"strings"
	"testing"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/check"
)

var badInputTests = []test{
	{"RejectedAppendsWriteNothing", testBadAppends},
	{"BadStreamNameOnRead", testBadRead},
	{"CanceledContext", testCanceledAppend},
	{"BadFilters", testBadFilters},
	{"LongFiltersWorkEverywhere", testLongFilters},
	{"ExtremeVersionsAndPositions", testExtremeVersionsAndPositions},
	{"UseAfterClose", testUseAfterClose},
	{"CloseWhileBusy", testCloseWhileBusy},
	{"ReservedNamesOnlyFromCairnsWriters", testReservedNames},
}

func testBadAppends(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	ctx := context.Background()
	good := func() eventstore.EventData { return event("x", "ok") }
	withEvent := func(i int, change func(*eventstore.EventData)) []eventstore.EventData {
		evs := []eventstore.EventData{good(), good(), good()}
		change(&evs[i])
		return evs
	}
	dup := withEvent(0, func(*eventstore.EventData) {})
	dup[2].ID = dup[0].ID

	cases := []struct {
		name   string
		stream string
		events []eventstore.EventData
		field  string
		index  int
	}{
		{"empty stream name", "", []eventstore.EventData{good()}, "stream", -1},
		{"reserved stream name", "$" + n.stream("sys"), []eventstore.EventData{good()}, "stream", -1},
		{"overlong stream name", n.stream(strings.Repeat("s", storekit.MaxStreamLen)), []eventstore.EventData{good()}, "stream", -1},
		{"control character in stream name", n.stream("a\x00b"), []eventstore.EventData{good()}, "stream", -1},
		{"no events", n.stream("none"), nil, "events", -1},
		{"empty type", n.stream("t"), withEvent(1, func(e *eventstore.EventData) { e.Type = "" }), "type", 1},
		{"overlong type", n.stream("t"), withEvent(2, func(e *eventstore.EventData) { e.Type = strings.Repeat("t", storekit.MaxTypeLen+1) }), "type", 2},
		{"invalid UTF-8 type", n.stream("t"), withEvent(0, func(e *eventstore.EventData) { e.Type = "bad\xff" }), "type", 0},
		{"nil data", n.stream("d"), withEvent(1, func(e *eventstore.EventData) { e.Data = nil }), "data", 1},
		{"oversize data", n.stream("d"), withEvent(2, func(e *eventstore.EventData) { e.Data = make([]byte, storekit.MaxEventSize+1) }), "data", 2},
		{"empty metadata key", n.stream("m"), withEvent(0, func(e *eventstore.EventData) { e.Metadata.Extra = map[string]string{"": "v"} }), "metadata", 0},
		{"invalid UTF-8 metadata value", n.stream("m"), withEvent(1, func(e *eventstore.EventData) { e.Metadata.Extra = map[string]string{"k": "bad\xff"} }), "metadata", 1},
		{"control character in metadata key", n.stream("m"), withEvent(2, func(e *eventstore.EventData) { e.Metadata.Extra = map[string]string{"a\nb": "v"} }), "metadata", 2},
		{"NUL byte in command ID", n.stream("m"), withEvent(0, func(e *eventstore.EventData) { e.Metadata.CommandID = "cmd\x00" }), "command ID", 0},
		{"invalid UTF-8 correlation ID", n.stream("m"), withEvent(1, func(e *eventstore.EventData) { e.Metadata.CorrelationID = "\xc3" }), "correlation ID", 1},
		// One input, one message: the IDs are checked in a fixed order.
		{"bad correlation, causation and command IDs", n.stream("m"), withEvent(2, func(e *eventstore.EventData) {
			e.Metadata = eventstore.Metadata{CorrelationID: "x\x00", CausationID: "y\x00", CommandID: "z\x00"}
		}), "correlation ID", 2},
		{"bad causation and command IDs", n.stream("m"), withEvent(0, func(e *eventstore.EventData) {
			e.Metadata = eventstore.Metadata{CausationID: "y\xff", CommandID: "z\x00"}
		}), "causation ID", 0},
		{"overlong command ID", n.stream("m"), withEvent(1, func(e *eventstore.EventData) {
			e.Metadata.CommandID = strings.Repeat("c", storekit.MaxCommandIDLen+1)
		}), "command ID", 1},
		{"repeated ID in one append", n.stream("id"), dup, "id", 2},
	}
	for _, c := range cases {
		// Twice: a message that depended on map order would differ.
		_, first := s.Append(ctx, c.stream, eventstore.Any, c.events...)
		_, err := s.Append(ctx, c.stream, eventstore.Any, c.events...)
		check.True(t, first != nil, "%s: want an error, got nil", c.name)
		check.Equal(t, err.Error(), first.Error(), c.name)
		check.True(t, err != nil, "%s: want an error, got nil", c.name)
		check.ErrorIs(t, err, eventstore.ErrInvalidArgument, c.name)
		var bad *eventstore.InvalidArgumentError
		check.ErrorAs(t, err, &bad, c.name)
		check.Equal(t, bad.Stream, c.stream, c.name)
		check.Equal(t, bad.Index, c.index, c.name)
		check.Contains(t, bad.Field, c.field, c.name)
		check.AtMost(t, len(err.Error()), 512, "%s: the message quotes a long value in part: %s", c.name, err)
	}
	requireNothingWritten(t, s, n, "every append was invalid")
}

func testBadRead(t testing.TB, s eventstore.Store) {
	for _, stream := range []string{"", "$all"} {
		var errs int
		for _, err := range s.ReadStream(context.Background(), stream, eventstore.Forward(0)) {
			check.ErrorIs(t, err, eventstore.ErrInvalidArgument, "reading stream %q", stream)
			errs++
		}
		check.Equal(t, errs, 1, "reading stream %q yields one error", stream)
	}
}

func testCanceledAppend(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Append(ctx, n.stream("canceled"), eventstore.Any, events("x", 2)...)
	check.True(t, err != nil, "want an error, got nil")
	check.True(t, isCanceled(err), "append on a canceled context: %v", err)
	requireNothingWritten(t, s, n, "the append's context was canceled")

	var errs int
	for _, err := range s.ReadStream(ctx, n.stream("canceled"), eventstore.Forward(0)) {
		check.True(t, isCanceled(err), "read on a canceled context: %v", err)
		errs++
	}
	check.AtMost(t, errs, 1)
}
