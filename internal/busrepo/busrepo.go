// Package busrepo is what an aggregate.Repository offers the command bus
// beside its API: the lookup of a command's earlier outcome, the refresh of
// a cached instance, a save that records the command's type, and the
// recorded rejection of a command (its stored form, and how to save and
// read it). They exist for the bus's exactly-once dispatch, and a user who
// dispatches through the bus never calls them, so none is in the
// aggregate API. Cairn's own tests and kits (commandtest, the saga and
// projection tests, the simulation) read recorded rejections through it
// too.
//
// Package aggregate registers the repository's view when it is
// initialised; any package that names an aggregate.Repository has it
// linked in.
package busrepo

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
)

// Repo is the bus's view of the repository of one aggregate type; I is
// its instance type, *aggregate.Instance[T, PT]. Every method refuses an
// instance that no Load returned, as "instance".
type Repo[I any] interface {
	// Load is the repository's Load of aggregate id, whose stream is
	// stream: the bus has validated id and made its stream name already,
	// for the lock it takes on the stream before loading.
	Load(ctx context.Context, id, stream string) (I, error)

	// Refresh brings inst up to date with its stream: it applies the
	// events appended since inst was loaded or saved, by another process
	// or another bus. A cache of instances calls it when a decision made on
	// a cached instance appends nothing (a rejection, an accepted no-op),
	// and decides again: no version conflict would reveal that such a
	// decision was made on a state that others have moved past. A
	// decision that appends needs no refresh: its append expects the
	// instance's version. Usually the stream has no new event, and
	// Refresh costs one short read.
	//
	// inst is updated in place and returned. On error inst must be
	// discarded; should its stream have been deleted and recreated,
	// Refresh loads it anew.
	Refresh(ctx context.Context, inst I) (I, error)

	// PriorOutcome returns what command commandID did to inst's aggregate
	// before, and true; or false when it produced no events there. A
	// command whose rejection was recorded (see SaveRejection) is found
	// too: the Outcome's Rejection says so, and it has no Events.
	//
	// It answers from the instance when it can: it remembers the commands
	// of the last 1,024 events it replayed or saved. For the events before
	// those (below a snapshot, or forgotten) it asks the store's
	// storekit.CommandIndex when the store has one, and otherwise scans
	// the stream backward from there, down to its first event when the
	// command is not there: the cost of an exact answer without an index.
	// The events are read again and decoded, so a duplicate's outcome is
	// the same values the first dispatch returned (after upcasting).
	PriorOutcome(ctx context.Context, inst I, commandID string) (Outcome, bool, error)

	// RecentOutcome is PriorOutcome answered from what the instance
	// remembers, never from the store: a command it cannot answer for
	// (below a snapshot, or forgotten) is reported not found and, unlike
	// a command that is certainly new, not certain. The caller must then
	// not return a decision that appends nothing before PriorOutcome has
	// said the command is new; a decision that appends is safe, for the
	// store refuses the events of a command it holds anywhere in the
	// stream (their IDs derive from the command ID), and then PriorOutcome
	// finds its outcome.
	RecentOutcome(ctx context.Context, inst I, commandID string) (out Outcome, found, certain bool, err error)

	// Save is aggregate.Repository.Save, recording opts.CommandType with
	// the events, and answering a duplicate append with the outcome
	// stored, which may be a recorded rejection of the command (Rejection
	// set, no Events): another dispatch of it was rejected first, and that
	// is its outcome.
	Save(ctx context.Context, inst I, events []any, opts SaveOptions) (Outcome, error)

	// SaveRejection records that command opts.CommandID was rejected for
	// rej's reason: it appends one recorded rejection (RejectionType) to
	// inst's stream, expecting inst's version, with the ID the command's
	// first event would have, and on success brings inst to its version
	// (the state is unchanged: Apply never sees it). The returned Outcome
	// has Rejection set to what was stored, and no Events.
	//
	// Like Save, it answers a version conflict with the store's
	// *eventstore.WrongVersionError (inst is stale: load it again and look
	// for the command ID, which may have succeeded meanwhile). When the
	// store reports the append as a duplicate, the stream already holds at
	// that place what another dispatch of the command appended first: that
	// outcome is returned, flagged Duplicate, whether it is the same
	// rejection or the command's success (its first event has the same
	// ID). opts.CommandID must not be empty: a rejection is found again by
	// its command ID.
	SaveRejection(ctx context.Context, inst I, rej Rejection, opts SaveOptions) (Outcome, error)
}

// SaveOptions say what the bus records with a command's events.
type SaveOptions struct {
	// CommandID is the ID of the command that produced the events. It is
	// recorded in their metadata, and their IDs are derived from it (see
	// [github.com/cairn-es/cairn/eventstore/storekit.CommandEventID]).
	// Empty means events with new random IDs and no command ID.
	CommandID string
	// Metadata is copied into every event (its CommandID is replaced by the
	// one above).
	Metadata eventstore.Metadata
	// CommandType names the type of the command, recorded in the events'
	// metadata under [CommandTypeKey], so that a later command with the
	// same ID can be told apart when it is of another type (see
	// [Outcome.CommandType]). Empty records none.
	CommandType string
}

// CommandTypeKey is the metadata key (in [eventstore.Metadata.Extra])
// under which Save and SaveRejection record [SaveOptions.CommandType].
// Keys starting with "cairn." are Cairn's own.
const CommandTypeKey = "cairn.command"

// Outcome is what a command did to an aggregate.
type Outcome struct {
	// FirstVersion and LastVersion are the versions of the first and last
	// event the command produced.
	FirstVersion, LastVersion uint64
	// Events are the events as decoded from the store: the values that
	// replays apply, after upcasting.
	Events []any
	// Duplicate reports that the store already held these events: an
	// identical decision was appended before.
	Duplicate bool
	// Rejection, when not nil, says that the command was rejected and its
	// rejection recorded, as the one event at FirstVersion (see
	// Repo.SaveRejection); Events is then empty.
	Rejection *Rejection
	// Position is the global position of the command's last event.
	Position eventstore.Position
	// CommandType is the type of the command, as its events recorded it
	// (see [SaveOptions.CommandType]); empty when they recorded none.
	CommandType string
	// Origin is the free metadata ([eventstore.Metadata.Extra]) of the
	// command's first stored event, for a duplicate: it holds the trace
	// context of the append that stored the outcome, which a redelivery's
	// span links to.
	Origin map[string]string
}

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

// IsRejection reports whether e is a recorded rejection.
func IsRejection(e *eventstore.Event) bool { return e.Type == RejectionType }

// DecodeRejection reads a recorded rejection. An event of another type, of
// a schema version this code does not know, or whose data is not a
// rejection, is a [*codec.DecodeError] naming it.
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

// view and canHandle are aggregate's doors, a func(*aggregate.Repository[T,
// PT]) Repo[*aggregate.Instance[T, PT]] and a func(*aggregate.Type[T, PT],
// reflect.Type) bool, type-erased since they serve every T.
var (
	view      func(repo any) any
	canHandle func(typ any, ct reflect.Type) bool
)

// Register is called by package aggregate with its doors.
func Register(viewFn func(repo any) any, canHandleFn func(typ any, ct reflect.Type) bool) {
	view, canHandle = viewFn, canHandleFn
}

// For returns the bus's view of repo, an *aggregate.Repository[T, PT]
// whose instances are I (*aggregate.Instance[T, PT]). It is meant to be
// called once per repository, when a route is set up, not per command.
func For[I any](repo any) Repo[I] { return view(repo).(Repo[I]) }

// CanHandle reports whether typ, an *aggregate.Type[T, PT], can decide
// commands of Go type ct: with a handler bound by aggregate.Handles, or
// else with the Handle method of aggregate.Aggregate when *T implements
// it. The command bus checks it when a command type is routed.
func CanHandle(typ any, ct reflect.Type) bool { return canHandle(typ, ct) }
