// Package storekit is for the authors of event stores, as database/sql/driver
// is for the authors of SQL drivers: users of a store never import it.
//
// It holds two things. First, the contract a store meets beyond
// [eventstore.Store] for Cairn's own consumers: [CheckpointStore] and
// [TxCheckpointStore] for projections and saga runners, [LeaseStore] and
// [TxLeaseStore] for running one consumer in several processes,
// [DeadLetterStore] for parked events, [SnapshotStore] for aggregates and
// [CommandIndex] for the command bus's redelivery lookups, with the typed
// errors behind eventstore's sentinels. Projections, sagas and the bus find
// these interfaces on the store they are given; a store implements those it
// can.
//
// Second, the kit every store is built with, so that all of them check the
// same input the same way and answer it with the same errors:
//
//   - appends: [PrepareAppend] checks and copies what to append (limits
//     such as [MaxEventSize], names only Cairn may write), [CheckRepeat]
//     decides whether an append repeats one already stored, and
//     [StreamState] reports the actual state in a wrong-version error;
//   - reads: [ReadPages], [ReadStreamPages] (or [ReadStreamPagesInto], on
//     pooled page buffers) and [Follow] build ReadAll,
//     ReadStream and Subscribe on a store's one-page read, with byte-bounded
//     pages ([PageBytes], [PageFull]) and a [Notifier] for live wake-ups; a
//     store that hands out its stream page reader ([PagedStreams]) lets
//     aggregate repositories read streams with [ReadStreamWith] on a page
//     buffer of their own, without an iterator per load;
//   - consumers: the Check and Validate functions give every checkpoint,
//     lease and dead letter operation one rule and one error.
//
// A new store is tested with package storetest, the one conformance suite;
// docs/writing-a-store.md walks through the memory store as the example.
package storekit
