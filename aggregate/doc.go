// Package aggregate turns a user's Go struct into an event-sourced
// aggregate: it rebuilds the struct from its own stream (snapshot + tail,
// decoded and upcast by a codec.Registry) and appends the events the struct
// decides on, with the loaded version as the expected version.
//
// An aggregate is a struct with a method (or func) per command type that
// decides what the command means and must not change the struct, bound
// with [Handles], and one per event type that evolves it by one event,
// bound with [Applies]: each takes its own Go type, so no code asserts one.
// A struct whose pointer implements [Aggregate] (Handle and Apply for
// every type) is the fallback for whatever has no binding. An aggregate
// [Type], made with [NewType] and the bindings, gives the struct a name,
// the stream category, so that instance id lives in stream "<name>-<id>".
// A [Repository] loads and saves instances of one type. Most code loads
// through it to answer queries and leaves deciding to the command bus
// (package command), which builds on it to route, retry and deduplicate
// commands, and which, when asked (command.Message.RecordRejection),
// records a rejected command in its aggregate's stream as one event of
// Cairn's own that loads never decode nor apply, so that the command's ID
// keeps that outcome for good. [Repository.Save] is for code that decides
// outside the bus: a migration, a test's set-up.
//
// Cairn never lets a user's bug or a stored event it cannot read take the
// process down: a panic in a handler or applier is recovered into a
// [*PanicError], a decided event with no applier is refused before it is
// stored ([*UnknownEventError]; with the [Aggregate] fallback, its Apply
// judges the event, once stored), and a stored event that cannot be applied
// is an [*ApplyError] naming its stream, version and type.
package aggregate
