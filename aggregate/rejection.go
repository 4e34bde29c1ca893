package aggregate

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/trusted"
)

// A recorded rejection is one event of Cairn's own in an aggregate's
// stream, saying that a command was rejected. A sender that must see one
// final outcome per command ID (a saga's outbox) asks for it: a rejection
// otherwise writes nothing, and the same command ID re-sent after the
// aggregate changed could then succeed. Appending it to the aggregate's own
// stream, at the loaded version, serializes it with any success of the same
// command: whichever is appended first is the command's outcome.
const (
	// RejectionType is the stored type name of a recorded rejection. It
	// starts with [codec.ReservedPrefix], which no user type may be
	// registered under: the event is never decoded by a user's codec, and
	// never reaches an aggregate's Apply.
	RejectionType = codec.ReservedPrefix + "command-rejected"
	// RejectionSchemaVersion is the schema version of the recorded
	// rejections this code writes, and the only one it reads.
	RejectionSchemaVersion = 1
	// MaxRejectionReason bounds the reason kept in a recorded rejection, in
	// bytes: far more than any error message needs, far less than an
	// event may hold, so that an enormous error text cannot make the record
	// fail and the rejection go unrecorded.
	MaxRejectionReason = 64 << 10
)

// Rejection is what a recorded rejection says. Its data is the JSON
// object {"reason": ..., "command": ...}; its metadata carries the command
// ID, correlation and causation IDs, as a command's events do.
type Rejection struct {
	// Reason is the rejection's error text, as Error() returned it, made
	// valid UTF-8 and cut to [MaxRejectionReason] bytes.
	Reason string `json:"reason"`
	// Command is the rejected command's Go type, as %T prints it.
	Command string `json:"command"`
	// Code is the code the codec registered for the rejection's error (see
	// codec.RegisterError), "" for none: what lets a reader match the
	// recorded rejection with errors.Is.
	Code string `json:"code,omitempty"`
}

// IsRejection reports whether e is a recorded rejection, which a reader
// of aggregate streams through a user's codec must skip.
func IsRejection(e *eventstore.Event) bool { return e.Type == RejectionType }

// DecodeRejection reads a recorded rejection, for readers that want to
// show rejections (the bus and the repository read them themselves). An
// event of another type, of a schema version this code does not know, or
// whose data is not a rejection, is a [*codec.DecodeError] naming it.
func DecodeRejection(e *eventstore.Event) (Rejection, error) {
	bad := func(sentinel error, reason string) error {
		return &codec.DecodeError{Stream: e.StreamID, Version: e.Version, Position: e.Position, Type: e.Type,
			SchemaVersion: e.SchemaVersion, Err: fmt.Errorf("%w: %s", sentinel, reason)}
	}
	switch {
	case !IsRejection(e):
		return Rejection{}, bad(codec.ErrUnexpectedType, "not a recorded rejection ("+RejectionType+")")
	case e.SchemaVersion > RejectionSchemaVersion:
		return Rejection{}, bad(codec.ErrVersionTooNew, fmt.Sprintf("this code reads recorded rejections of version %d", RejectionSchemaVersion))
	case e.SchemaVersion < RejectionSchemaVersion:
		return Rejection{}, bad(codec.ErrNoUpcastPath, fmt.Sprintf("recorded rejections start at version %d", RejectionSchemaVersion))
	}
	var rej Rejection
	if err := json.Unmarshal(e.Data, &rej); err != nil {
		return Rejection{}, bad(codec.ErrUndecodable, err.Error())
	}
	return rej, nil
}

// clip makes rej what is stored: valid UTF-8 (JSON would replace the
// invalid bytes anyway), the reason cut at a rune boundary.
func (rej Rejection) clip() Rejection {
	rej.Reason = strings.ToValidUTF8(rej.Reason, "\uFFFD")
	if len(rej.Reason) > MaxRejectionReason {
		cut := MaxRejectionReason
		for cut > 0 && !utf8.RuneStart(rej.Reason[cut]) {
			cut--
		}
		rej.Reason = rej.Reason[:cut]
	}
	rej.Command = strings.ToValidUTF8(rej.Command, "\uFFFD")
	return rej
}

// SaveRejection records that command opts.CommandID was rejected for
// rej's reason: it appends one recorded rejection ([RejectionType]) to
// inst's stream, expecting inst's version, with the ID [EventID] gives the
// command's first event, and on success brings inst to its version (the
// state is unchanged: Apply never sees it). The returned Outcome has
// Rejection set to what was stored, and no Events.
//
// Like [Repository.Save], it answers a version conflict with the store's
// [*eventstore.WrongVersionError] (inst is stale: load it again and look
// for the command ID, which may have succeeded meanwhile). When the store
// reports the append as a duplicate, the stream already holds at that place
// what another dispatch of the command appended first: that outcome is
// returned, flagged Duplicate, whether it is the same rejection or the
// command's success (its first event has the same ID). opts.CommandID must
// not be empty: a rejection is found again by its command ID.
func (r *Repository[T, PT]) SaveRejection(ctx context.Context, inst *Instance[T, PT], rej Rejection, opts SaveOptions) (Outcome, error) {
	if err := checkInstance(inst); err != nil {
		return Outcome{}, err
	}
	if opts.CommandID == "" {
		return Outcome{}, &eventstore.InvalidArgumentError{Stream: inst.Stream, Index: -1, Field: "command ID",
			Reason: "is empty: a recorded rejection is found again by its command ID"}
	}
	rej = rej.clip()
	data, err := json.Marshal(rej)
	if err != nil {
		return Outcome{}, err // unreachable: two strings
	}
	md := opts.metadata()
	ev := eventstore.EventData{ID: EventID(inst.Stream, opts.CommandID, 0), Type: RejectionType,
		SchemaVersion: RejectionSchemaVersion, Data: data, Metadata: md}
	res, err := r.store.Append(trusted.Writer(ctx), inst.Stream, inst.Expected(), ev)
	if err != nil {
		return Outcome{}, err
	}
	if res.Duplicate {
		return r.storedOutcome(ctx, inst, opts.CommandID, res.FirstVersion)
	}
	e := eventstore.Event{EventData: ev, StreamID: inst.Stream, Version: res.FirstVersion}
	if _, err := r.apply(inst, &e, nil); err != nil {
		return Outcome{}, err // unreachable: a rejection is not decoded
	}
	r.maybeSnapshot(ctx, inst)
	return Outcome{FirstVersion: res.FirstVersion, LastVersion: res.FirstVersion, Position: res.Position, Rejection: &rej,
		CommandType: opts.CommandType}, nil
}
