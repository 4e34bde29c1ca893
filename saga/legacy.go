package saga

import (
	"encoding/json"
	"math"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
)

// Version 1 step records, written before records kept stored events by
// reference, are read and upgraded here, so that instances that were in
// flight when the code changed go on where they were.

// legacyRejections was version 1's source of rejections: its watermark
// was the highest (record version << 16 | index) + 1 taken.
const legacyRejections = "$rejected"

type legacyRecord struct {
	Handled    legacyCause       `json:"handled"`
	State      raw               `json:"state"`
	Marks      map[string]uint64 `json:"marks"`
	Held       []legacyMessage   `json:"held"`
	Parked     *legacyParked     `json:"parked"`
	Commands   []sentCommand     `json:"commands"`
	Deadlines  []deadline        `json:"deadlines"`
	Completed  bool              `json:"completed"`
	Duplicates uint64            `json:"duplicates"`
}

type legacyCause struct {
	Kind     string              `json:"kind"`
	Source   string              `json:"source"`
	Sequence uint64              `json:"seq"`
	EventID  uuid.UUID           `json:"event_id"`
	Type     string              `json:"type"`
	Position eventstore.Position `json:"position"`
	Ordered  bool                `json:"ordered"`
	Deadline string              `json:"deadline"`
	Command  string              `json:"command"`
	Reason   string              `json:"reason"`
	Event    *raw                `json:"event"`
	Metadata eventstore.Metadata `json:"metadata"`
	At       time.Time           `json:"at"`
}

type legacyMessage struct {
	Kind     string              `json:"kind"`
	Source   string              `json:"source"`
	Sequence uint64              `json:"seq"`
	Ordered  bool                `json:"ordered"`
	EventID  uuid.UUID           `json:"event_id"`
	Position eventstore.Position `json:"position"`
	Event    raw                 `json:"event"`
	Metadata eventstore.Metadata `json:"metadata"`
	Command  string              `json:"command"`
	Reason   string              `json:"reason"`
	Since    time.Time           `json:"since"`
}

type legacyParked struct {
	Message  legacyMessage `json:"message"`
	Deadline string        `json:"deadline"`
	Error    string        `json:"error"`
	Attempts int           `json:"attempts"`
	Since    time.Time     `json:"since"`
}

// legacySent returns the version of the record that sent the command whose
// version 1 rejection sequence is seq.
func legacySent(seq uint64) uint64 {
	if seq == 0 {
		return 0
	}
	return (seq - 1) >> 16
}

// decodeLegacyRecord reads a version 1 record as a version 2 one. Held
// stored events become their stream's pending progress (they are read
// again from the store); the one rejection watermark becomes the horizon
// below which settled commands are looked up in the instance's history.
func decodeLegacyRecord(data []byte) (*record, error) {
	var old legacyRecord
	if err := json.Unmarshal(data, &old); err != nil {
		return nil, err
	}
	r := &record{State: old.State, Commands: old.Commands, Deadlines: old.Deadlines, Completed: old.Completed,
		Duplicates: old.Duplicates, Sources: make(map[string]progress)}
	if r.Completed {
		r.CompletedAt = math.MaxUint64 // as version 1 did, it takes nothing more
	}
	for src, mark := range old.Marks {
		if src == legacyRejections {
			r.Settled.Below = legacySent(mark) + 1
			continue
		}
		r.Sources[src] = progress{Next: mark + 1}
	}
	for _, h := range old.Held {
		if h.Ordered && h.Kind != kindRejected {
			// A stored event held: its stream is read again from the store,
			// from its watermark, or from the first event held of a stream
			// the instance had not handled before.
			p, seen := r.Sources[h.Source]
			if _, marked := old.Marks[h.Source]; !marked && (!seen || h.Sequence < p.Next) {
				p.Next = h.Sequence
			}
			p.Pending, p.HeldTo = true, max(p.HeldTo, h.Sequence)
			r.Sources[h.Source] = p
			continue
		}
		r.Held = append(r.Held, legacyEnvelope(h))
	}
	if p := old.Parked; p != nil {
		m := legacyEnvelope(p.Message)
		if p.Deadline != "" {
			m = envelope{Deadline: p.Deadline}
		}
		r.Parked = &parkedMessage{Message: m, Error: p.Error, Attempts: p.Attempts, Since: p.Since}
	}
	h := old.Handled
	r.Handled = cause{Kind: h.Kind, At: h.At, Message: envelope{Source: h.Source, Sequence: h.Sequence, Ordered: h.Ordered,
		EventID: h.EventID, Type: h.Type, Position: h.Position, Deadline: h.Deadline, Event: h.Event}}
	if h.Event != nil {
		md := h.Metadata
		r.Handled.Message.Metadata = &md
	}
	if h.Command != "" {
		r.Handled.Message = envelope{Kind: kindRejected, Command: h.Command, Sent: legacySent(h.Sequence), Reason: h.Reason,
			Event: h.Event}
	}
	return r, nil
}

// legacyEnvelope is a version 1 message as an envelope.
func legacyEnvelope(h legacyMessage) envelope {
	if h.Kind == kindRejected {
		cmd := h.Event // version 1 kept the rejected command inline
		return envelope{Kind: kindRejected, Command: h.Command, Type: h.Event.Type, Sent: legacySent(h.Sequence), Reason: h.Reason,
			Event: &cmd, Since: h.Since}
	}
	ev, md := h.Event, h.Metadata
	m := envelope{Source: h.Source, Sequence: h.Sequence, Ordered: h.Ordered, EventID: h.EventID, Type: h.Event.Type,
		Position: h.Position, Since: h.Since}
	if !h.Ordered {
		m.Event, m.Metadata = &ev, &md
	}
	return m
}
