package command

import "github.com/cairn-es/cairn/eventstore"

// Command is a command: a request to one aggregate, which it names.
type Command interface {
	// AggregateID returns the ID of the aggregate the command is for.
	AggregateID() string
}

// Message is a command with what travels with it.
type Message struct {
	// ID identifies this command across redeliveries: pass the ID of the
	// message it came from. Empty means a new, random ID (and then a
	// redelivery cannot be recognized).
	ID string
	// CorrelationID ties together the messages of one business flow; empty
	// means ID, starting a flow. It is copied into the events.
	CorrelationID string
	// CausationID is the ID of the message that caused this command; empty
	// means ID. It is copied into the events.
	CausationID string
	// Extra key/values are copied into the events' metadata.
	Extra map[string]string
	// Command is the command itself; its Go type selects the route.
	Command Command
	// RecordRejection asks the bus to record the aggregate's rejection of
	// the command durably, in the aggregate's stream, so that the command
	// ID has one final outcome: for senders that must see one final
	// outcome per command ID, like saga outboxes. A re-send of the ID then
	// returns the same rejection, as a [*RecordedRejectionError], even when
	// the aggregate has changed so that the command would now succeed.
	// Without it a rejection writes nothing, and the ID is decided again
	// when it comes back. It needs an ID of the caller's.
	RecordRejection bool
}

// Result is the outcome of a dispatched command.
type Result struct {
	// AggregateID, Stream and CommandID say what the command went to, and
	// under which ID.
	AggregateID, Stream, CommandID string
	// Version is the aggregate's version after the command: the version of
	// its last event, or of its recorded rejection. It is meaningless for
	// an aggregate that has no events.
	Version uint64
	// Position is the global position of the command's last event (or of
	// its recorded rejection): pass it to projection.Consumer.WaitFor to
	// read a read model that shows the command's effect. It is zero when
	// the command appended nothing.
	Position eventstore.Position
	// Events are the events the command produced, as decoded from the store
	// (the values a replay applies): none when it decided that nothing
	// happens.
	Events []any
	// Duplicate reports that the command ID had already produced these
	// events, or had its rejection recorded: this dispatch appended
	// nothing.
	Duplicate bool
	// Attempts is how many times the command was decided on the stream as
	// it was: more than one after version conflicts with other writers. A
	// decision on a cached state that the stream had passed, made again,
	// does not count, nor does a refusal of the command's own events that
	// its lookup then answers.
	Attempts int
	// Rejected reports that the aggregate refused the command: the error
	// Dispatch returned is its Handle's, unchanged, or, when the command
	// ID's rejection was recorded before (see Message.RecordRejection), a
	// [*RecordedRejectionError] with Duplicate set. Every other error (the
	// store's, a contention give-up, a canceled context, a failure to
	// record the rejection) leaves it false, so that a sender can tell a
	// final "no" from a failure worth retrying.
	Rejected bool
}
