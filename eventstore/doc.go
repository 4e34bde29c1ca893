// Package eventstore is the storage contract of Cairn: streams, expected
// versions, global positions and subscriptions.
//
// It knows bytes, not Go domain types. A [Store] appends events to named,
// ordered, append-only streams and reads them back, per stream or in global
// order, and follows new events as they are committed. Implementations live
// in the sub-packages (memory, sqlite, postgres) and all of them pass the
// one conformance suite in package storetest.
//
// The contract, in short:
//
//   - A stream's events are numbered 0, 1, 2, ... (the stream version).
//   - Every event also has a global [Position], strictly increasing in the
//     order subscribers see events.
//   - [Store.Append] is atomic and checks an [ExpectedVersion]; a mismatch is
//     a [*WrongVersionError] that matches [ErrWrongVersion].
//   - Appending event IDs that the stream already holds at that place
//     succeeds and writes nothing, so a publisher that retries never
//     duplicates.
//   - Reads and subscriptions are iterators ([iter.Seq2]); memory use stays
//     flat whatever the stream length.
//   - A subscription never skips a committed event, and resuming after a
//     position continues exactly after it.
//
// Every store enforces the same limits, so that an application can move
// between stores without its appends starting to fail (KurrentDB's default
// maximum append is 1 MiB; the others follow it): a stream name of at most
// 512 bytes and an event type of at most 256, both printable UTF-8, and no
// stream starting with "$"; an event of at most 1 MiB of data and metadata;
// at most 10,000 events in one append; a command ID of at most 1,024 bytes;
// a [Filter] of at most 1,024 types and 1,024 stream prefixes. Streams
// starting with "saga:", and types and metadata keys starting with "cairn.",
// are Cairn's own: a store refuses them from any other writer. Input over a
// limit is an [*InvalidArgumentError] naming it, and nothing is written.
//
// Stores also keep what projections, sagas and the command bus need
// (checkpoints, leases, dead letters, snapshots, a command index); those
// interfaces, and the kit stores are built with, are in package
// eventstore/storekit, which only the authors of stores import.
package eventstore
