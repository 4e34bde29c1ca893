package saga

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/upcast"
)

// Step records are the events of an instance stream: one per step.
const (
	recordType    = "cairn.saga.step"
	recordVersion = 1
)

// rejectionSource is the source of the rejections fed back to an instance;
// no stream or delivery source can be named so (they cannot start with
// "$"). Its sequence is the rejected command's place: the version of the
// record that sent it and its index there (see rejectionSeq).
const rejectionSource = "$rejected"

// rejectionSeq orders the commands of an instance: by the record that sent
// them, then by their index in it. It starts at 1, so that a watermark of
// 0 (or none) means that no rejection was fed back.
func rejectionSeq(recordVersion uint64, index int) uint64 {
	return (recordVersion<<16 | uint64(index)) + 1
}

// maxCommandsPerStep bounds the commands of one step, so that rejectionSeq
// stays unique.
const maxCommandsPerStep = 1 << 16

// record is one step of an instance: what it handled and everything the
// instance is after it, so that loading an instance reads this one record.
type record struct {
	// Handled is the message this step handled (or held, or parked).
	Handled cause `json:"handled"`
	// State is the instance's state after the step, encoded by the codec.
	State raw `json:"state"`
	// Marks maps each source to the last sequence handled from it.
	Marks map[string]uint64 `json:"marks,omitempty"`
	// Held are messages waiting: for a gap in their source to fill, or
	// behind a parked message.
	Held []heldMessage `json:"held,omitempty"`
	// Parked is the message the instance failed on, if any: the instance
	// handles nothing else until it is retried or skipped.
	Parked *parkedMessage `json:"parked,omitempty"`
	// Commands are the commands this step sends.
	Commands []sentCommand `json:"commands,omitempty"`
	// Deadlines are the deadlines pending after this step.
	Deadlines []deadline `json:"deadlines,omitempty"`
	// Completed says the instance has ended.
	Completed bool `json:"completed,omitempty"`
	// Counts of messages this instance dropped, for operations.
	Duplicates uint64 `json:"duplicates,omitempty"`
}

// Step kinds, as records name them.
const (
	kindEvent    = "event"    // an event was handled
	kindDeadline = "deadline" // a deadline fired
	kindRejected = "rejected" // a sent command was rejected
	kindHeld     = "held"     // a message was held, early or behind a parked one
	kindParked   = "parked"   // a message failed and was parked
	kindSkipped  = "skipped"  // an operator skipped the parked message
	kindReleased = "released" // an operator released a gap
	kindRedriven = "redriven" // an operator set the instance back to re-run its messages
)

// cause says what a step did, and to which message.
type cause struct {
	Kind     string              `json:"kind"`
	Source   string              `json:"source,omitempty"`
	Sequence uint64              `json:"seq,omitempty"`
	EventID  uuid.UUID           `json:"event_id"`
	Type     string              `json:"type,omitempty"`
	Position eventstore.Position `json:"position"`
	// Ordered says the message came in its source's order (a stored event,
	// read by the runner's subscription), so a gap in its sequence is
	// expected rather than waited for.
	Ordered bool `json:"ordered,omitempty"`
	// Deadline is the ID of the deadline that fired.
	Deadline string `json:"deadline,omitempty"`
	// Command is the ID of the rejected command.
	Command string `json:"command,omitempty"`
	// Reason is a rejection's error text.
	Reason string `json:"reason,omitempty"`
	// Event is the message as it was stored or delivered (an event, or a
	// rejected command), before upcasting, and Metadata its metadata: with
	// them the instance's stream alone can replay its history through newer
	// code (see sagatest.CheckHistory).
	Event    *raw                `json:"event,omitempty"`
	Metadata eventstore.Metadata `json:"metadata"`
	// At is when the step ran, by the runner's clock.
	At time.Time `json:"at"`
}

// raw is a codec-encoded value: type name, schema version and data.
type raw struct {
	Type    string `json:"type"`
	Version uint32 `json:"v"`
	Data    []byte `json:"data"`
}

func toRaw(r upcast.Raw) raw     { return raw{Type: r.Type, Version: r.Version, Data: r.Data} }
func (r raw) upcast() upcast.Raw { return upcast.Raw{Type: r.Type, Version: r.Version, Data: r.Data} }

// heldMessage is a message kept in the instance's stream until it can be
// handled: the stored form of an event (before upcasting, so that it is
// upcast when it is handled) and where it came from.
type heldMessage struct {
	// Kind is kindEvent (or empty) for an event, kindRejected for a
	// rejection, whose Event is the rejected command.
	Kind     string              `json:"kind,omitempty"`
	Source   string              `json:"source"`
	Sequence uint64              `json:"seq"`
	Ordered  bool                `json:"ordered,omitempty"`
	EventID  uuid.UUID           `json:"event_id"`
	Position eventstore.Position `json:"position"`
	Event    raw                 `json:"event"`
	Metadata eventstore.Metadata `json:"metadata"`
	// Command and Reason are a rejection's command ID and error text.
	Command string `json:"command,omitempty"`
	Reason  string `json:"reason,omitempty"`
	// Since is when it was first held.
	Since time.Time `json:"since"`
}

// parkedMessage is the message an instance failed on.
type parkedMessage struct {
	Message heldMessage `json:"message"`
	// Deadline is the ID of a parked deadline (Message is then empty).
	Deadline string    `json:"deadline,omitempty"`
	Error    string    `json:"error"`
	Attempts int       `json:"attempts"`
	Since    time.Time `json:"since"`
}

// sentCommand is a command a step sends.
type sentCommand struct {
	ID      string `json:"id"`
	Command raw    `json:"command"`
}

// deadline is a pending deadline.
type deadline struct {
	// ID is unique per scheduling, so that a rescheduled deadline's earlier
	// timer is recognized and ignored.
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	At      time.Time `json:"at"`
	Payload raw       `json:"payload"`
}

// encodeRecord turns a record into the event that stores it.
func encodeRecord(stream string, version uint64, key string, r *record, md eventstore.Metadata) (eventstore.EventData, error) {
	data, err := json.Marshal(r)
	if err != nil {
		return eventstore.EventData{}, err
	}
	return eventstore.EventData{
		ID:            recordID(stream, version, key),
		Type:          recordType,
		SchemaVersion: recordVersion,
		Data:          data,
		Metadata:      md,
	}, nil
}

// decodeRecord reads a stored step record.
func decodeRecord(e eventstore.Event) (*record, error) {
	if e.Type != recordType || e.SchemaVersion != recordVersion {
		return nil, corrupt(e.StreamID, e.Version, "not a saga step record: type "+e.Type, nil)
	}
	var r record
	if err := json.Unmarshal(e.Data, &r); err != nil {
		return nil, corrupt(e.StreamID, e.Version, "undecodable step record", err)
	}
	return &r, nil
}

var idSpace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://github.com/cairn-es/cairn/saga/v1"))

// recordID is the event ID of the step at version of stream that handled
// the message with key: the same on every retry of that step, so that an
// append retried after a lost reply is absorbed, and different for any
// other step at that version, so that two runners that decided different
// messages from one version conflict instead of one taking the other's
// record for its own.
func recordID(stream string, version uint64, key string) uuid.UUID {
	return uuid.NewSHA1(idSpace, []byte(stream+"\x00record\x00"+uitoa(version)+"\x00"+key))
}

// commandID is the ID of the index-th command that the step handling key
// sends from stream: the same whenever that step is decided, so the bus
// absorbs a re-send.
func commandID(stream, key string, index int) string {
	return uuid.NewSHA1(idSpace, []byte(stream+"\x00command\x00"+key+"\x00"+uitoa(uint64(index)))).String()
}

// deadlineID identifies one scheduling of a deadline: the key of the
// message whose step set it, and its name. Each message is decided once,
// so a later scheduling of the same name has another ID (and the earlier
// one's timer is recognised as stale); and the same message decided again
// by [Runner.Redrive] schedules the same ID, so that the commands of its
// firing keep their IDs too and the bus absorbs them. (Records written
// before this rule hold "<version>/<name>" IDs, which still match
// themselves.)
func deadlineID(key, name string) string { return key + "/" + name }

func uitoa(v uint64) string { return strconv.FormatUint(v, 10) }
