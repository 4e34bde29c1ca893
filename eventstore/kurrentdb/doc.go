// Package kurrentdb is an [eventstore.Store] on KurrentDB (formerly
// EventStoreDB), the replicated event database, through the official Go
// client (github.com/EventStore/EventStore-Client-Go/v4), for services that
// outgrow one machine.
//
// It is a Go module of its own, so that programs on Cairn's other stores
// never have gRPC in their module graph.
//
// Open connects with a standard connection string:
//
//	store, err := kurrentdb.Open(ctx, "esdb://localhost:2113?tls=false", kurrentdb.Options{})
//
// Streams, event IDs, types and versions are KurrentDB's own: a Cairn
// stream "order-42" is the KurrentDB stream "order-42", and its events keep
// their IDs and revisions. Cairn's metadata (schema version, correlation,
// causation and command IDs, user keys) travels as the event's JSON
// metadata. A [eventstore.Position] is KurrentDB's (commit, prepare) pair.
//
// KurrentDB checks expected revisions itself, but its idempotence by event ID
// is partial (see docs/kurrentdb.md): the store makes Cairn's repeat rules
// hold by looking up an append's event IDs in its stream, which it remembers
// per stream so that only the events appended since are read again.
//
// Consumer state (checkpoints, leases, dead letters, snapshots) is kept in
// KurrentDB too, in streams under [StatePrefix] that Append refuses and reads
// leave out. There is no transaction shared with a read model: a
// projection into another database runs in Cairn's plain consumer mode, with
// idempotent handlers.
package kurrentdb
