package commandtest

import (
	"context"
	"strings"
	"testing"

	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/check"
)

// testBadMessages: a message the store could not record, or whose
// aggregate ID makes no valid stream name, is refused before anything is
// loaded or decided, naming the field the caller set, the same way every
// time, and nothing is written.
func testBadMessages(t testing.TB, e *env) {
	b := e.bus(command.Options{}, 0)
	id := e.id("bad")
	for _, c := range []struct {
		what  string
		msg   command.Message
		field string
	}{
		{"NUL byte in ID", command.Message{ID: "m\x00", Command: Increment{ID: id}}, "Message.ID"},
		{"invalid UTF-8 ID", command.Message{ID: "m\xff", Command: Increment{ID: id}}, "Message.ID"},
		{"overlong ID", command.Message{ID: strings.Repeat("m", storekit.MaxCommandIDLen+1), Command: Increment{ID: id}}, "Message.ID"},
		{"2 MB ID", command.Message{ID: strings.Repeat("m", 2<<20), Command: Increment{ID: id}}, "Message.ID"},
		{"NUL byte in correlation ID", command.Message{CorrelationID: "c\x00", Command: Increment{ID: id}}, "Message.CorrelationID"},
		{"invalid UTF-8 causation ID", command.Message{CausationID: "c\xff", Command: Increment{ID: id}}, "Message.CausationID"},
		{"bad ID, correlation and causation IDs", command.Message{ID: "m\x00", CorrelationID: "c\x00", CausationID: "d\x00", Command: Increment{ID: id}}, "Message.CorrelationID"},
		{"empty Extra key", command.Message{Extra: map[string]string{"": "v"}, Command: Increment{ID: id}}, "Message.Extra"},
		{"NUL byte in Extra value", command.Message{Extra: map[string]string{"k": "v\x00"}, Command: Increment{ID: id}}, "Message.Extra"},
		{"NUL byte in aggregate ID", command.Message{Command: Increment{ID: id + "\x00"}}, "aggregate ID"},
		{"invalid UTF-8 aggregate ID", command.Message{Command: Increment{ID: id + "\xff"}}, "aggregate ID"},
		{"overlong aggregate ID", command.Message{Command: Increment{ID: id + strings.Repeat("i", storekit.MaxStreamLen)}}, "aggregate ID"},
		{"4 MB aggregate ID", command.Message{Command: Increment{ID: id + strings.Repeat("i", 4<<20)}}, "aggregate ID"},
		{"RecordRejection without an ID", command.Message{RecordRejection: true, Command: Reject{ID: id}}, "Message.ID"},
	} {
		_, first := b.Dispatch(context.Background(), c.msg)
		check.Invalid(t, first, c.field, c.what)
		_, again := b.Dispatch(context.Background(), c.msg)
		check.Equal(t, again.Error(), first.Error(), "%s: one input, one message", c.what)
	}
	check.Len(t, e.events(id), 0, "a refused message wrote events")
}
