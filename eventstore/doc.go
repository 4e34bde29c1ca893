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
package eventstore
