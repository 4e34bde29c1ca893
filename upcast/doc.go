// Package upcast reads old events as the current model expects them.
//
// Streams are append-only: an event written by last year's code stays as it
// was written. An upcaster chain brings such an event, on read, to the type
// name and schema version the current code registers. Each [Step] is keyed
// by the (type name, schema version) it applies to and works on the raw
// form of an event ([Raw]: type, version, bytes, metadata), so it never
// needs the Go types of old versions. The kinds of step are:
//
//   - [Transform]: rewrite the data of version n into version n+1.
//   - [Rename]: give the event another type name, optionally another version.
//   - [Split]: turn one event into several (1:N).
//   - [Drop]: forget an event that no longer means anything.
//
// A [Chain] holds the steps. [Chain.Validate] checks, once at set-up, that
// every path ends at a registered type and version: no gap, no two steps
// for one key, no rename cycle, no dead end. [Chain.Apply] runs the steps on
// one stored event, lazily, at read time; stored events are never
// rewritten.
//
// Package codec owns a Chain per registry and runs it on every decode;
// most users only call the step constructors and codec.Registry.Upcast.
package upcast
