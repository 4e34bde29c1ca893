package saga

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/upcast"
)

// Step records are the events of an instance stream: one per step.
// Version 2 keeps stored events by reference; version 1 records (see
// legacy.go) are read and upgraded.
const (
	recordType    = "cairn.saga.step"
	recordVersion = 2
)

// record is one step of an instance: what it handled and everything the
// instance is after it, so that loading an instance reads this one record.
// Its size is bounded (see [MaxStepSize]): stored events appear in it by
// reference, and only what has no other home is kept inline (the state, a
// delivery's payload, a rejection's reason).
type record struct {
	// Handled is the message this step handled (or held, or parked).
	Handled cause `json:"handled"`
	// State is the instance's state after the step, encoded by the codec.
	State raw `json:"state"`
	// Sources is what the instance has taken from each source: in-order
	// dedup, out-of-order messages and stored events waiting to be read
	// again are kept there (see progress).
	Sources map[string]progress `json:"sources,omitempty"`
	// Held are the deliveries and rejections waiting: for a gap in their
	// source to fill, or behind a parked message. Stored events waiting
	// are not listed here: their source's progress is pending instead.
	Held []envelope `json:"held,omitempty"`
	// Parked is the message the instance failed on, if any: the instance
	// handles nothing else until it is retried or skipped.
	Parked *parkedMessage `json:"parked,omitempty"`
	// Commands are the commands this step sends.
	Commands []sentCommand `json:"commands,omitempty"`
	// Deadlines are the deadlines pending after this step.
	Deadlines []deadline `json:"deadlines,omitempty"`
	// Settled are the commands whose final outcome the instance took
	// (their rejection, or an operator's skip), so that none is taken twice
	// and the outbox sends none of them again.
	Settled settled `json:"settled,omitzero"`
	// Completed says the instance has ended, at the step whose version is
	// CompletedAt: it takes no more events or deadlines, only the outcomes
	// of the commands that step (or a later one) sent.
	Completed   bool   `json:"completed,omitempty"`
	CompletedAt uint64 `json:"completed_at,omitempty"`
	// Duplicates counts the messages this instance dropped, for operations.
	Duplicates uint64 `json:"duplicates,omitempty"`
	// Redrive is the latest Redrive of the instance, kept by every record
	// after it, for Explain.
	Redrive *redriveMark `json:"redrive,omitempty"`
}

// Step kinds, as records name them.
const (
	kindEvent    = "event"    // an event was handled
	kindDeadline = "deadline" // a deadline fired
	kindRejected = "rejected" // a sent command was rejected
	kindCommand  = "command"  // a sent command failed for good without a rejection
	kindHeld     = "held"     // a message was held, early or behind a parked one
	kindParked   = "parked"   // a message failed and was parked
	kindSkipped  = "skipped"  // an operator skipped the parked message
	kindReleased = "released" // held messages were taken out, or an operator released a gap
	kindRetried  = "retried"  // an operator re-sent the commands of a parked command
	kindRedriven = "redriven" // an operator set the instance back to re-run its messages
)

// envelope is a message as a record keeps it: what identifies it, and its
// payload only when the payload has no other home. A stored event (Ordered)
// is a reference, its Source and Sequence being its stream and version; a
// delivery keeps its event and metadata; a rejection or a failed command
// names the command and the record that sent it.
type envelope struct {
	// Kind is kindEvent, kindRejected or kindCommand; empty means
	// kindEvent.
	Kind     string `json:"kind,omitempty"`
	Source   string `json:"source,omitempty"`
	Sequence uint64 `json:"seq,omitempty"`
	// Ordered says the message is a stored event, read in its stream's
	// order, so a gap in its sequence is expected rather than waited for.
	Ordered  bool                `json:"ordered,omitempty"`
	EventID  uuid.UUID           `json:"event_id,omitzero"`
	Type     string              `json:"type,omitempty"`
	Position eventstore.Position `json:"position,omitzero"`
	// Event and Metadata are a delivery's payload, before upcasting.
	Event    *raw                 `json:"event,omitempty"`
	Metadata *eventstore.Metadata `json:"metadata,omitempty"`
	// Deadline is the ID of a deadline that fires.
	Deadline string `json:"deadline,omitempty"`
	// Command is the ID of a rejected or failed command, Sent the version
	// of the record that sent it, and Reason the rejection's or the
	// failure's text.
	Command string `json:"command,omitempty"`
	Sent    uint64 `json:"sent,omitempty"`
	Reason  string `json:"reason,omitempty"`
	// ReasonCode is the code the codec registered for a rejection's error
	// (see codec.RegisterError), "" for none.
	ReasonCode string `json:"reason_code,omitempty"`
	// Since is when the message was first held.
	Since time.Time `json:"since,omitzero"`
}

// kind returns the envelope's message kind.
func (m *envelope) kind() string {
	switch {
	case m.Deadline != "":
		return kindDeadline
	case m.Kind == "":
		return kindEvent
	}
	return m.Kind
}

// key identifies the message among those of its instance: the IDs of the
// commands and deadlines its step decides derive from it, and operators
// name a parked message by it (see [ParkedMessage.ID]).
func (m *envelope) key() string {
	switch m.kind() {
	case kindDeadline:
		return "d/" + m.Deadline
	case kindRejected:
		return "r/" + m.Command
	case kindCommand:
		return "c/" + m.Command
	}
	return "e/" + m.Source + "/" + uitoa(m.Sequence)
}

// cause says what a step did, and to which message.
type cause struct {
	Kind    string   `json:"kind"`
	Message envelope `json:"message"`
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

// parkedMessage is the message an instance failed on.
type parkedMessage struct {
	Message  envelope  `json:"message"`
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
	// ID derives from the instance, the message whose step set it and its
	// name (see deadlineID): fixed in size, and the same when that message
	// is decided again by [Runner.Redrive].
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	At      time.Time `json:"at"`
	Payload raw       `json:"payload"`
	// Trace is the traceparent of the append of the step that scheduled
	// the deadline, when that step was traced: the deadline's firing, a
	// new trace, links to it.
	Trace string `json:"trace,omitempty"`
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

// decodeRecord reads a stored step record, of this version or an earlier
// one, whole: for the readers of its state or payloads (loading an
// instance for a step, a replay, a redrive). The others read outlines
// (see decodeOutline).
func decodeRecord(e eventstore.Event) (*record, error) {
	if e.Type != recordType {
		return nil, corrupt(e.StreamID, e.Version, "not a saga step record: type "+e.Type, nil)
	}
	switch e.SchemaVersion {
	case recordVersion:
		// With encoding/json's rules, on the codec's quicker decoder:
		// records carry the state and payloads as base64 (three quarters
		// of the tab simulation's CPU went to encoding/json here; 40%
		// less in all on the codec's).
		var r record
		if err := (codec.JSON{}).Unmarshal(e.Data, &r); err != nil {
			return nil, corrupt(e.StreamID, e.Version, "undecodable step record", err)
		}
		return &r, nil
	case 1:
		r, err := decodeLegacyRecord(e.Data)
		if err != nil {
			return nil, corrupt(e.StreamID, e.Version, "undecodable step record (version 1)", err)
		}
		return r, nil
	}
	return nil, corrupt(e.StreamID, e.Version, "a step record of schema version "+uitoa(uint64(e.SchemaVersion))+", which this code does not know", nil)
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

func uitoa(v uint64) string { return strconv.FormatUint(v, 10) }
