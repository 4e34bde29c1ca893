// Package projection runs checkpointed consumers: a named reader of the
// global log that resumes from its stored checkpoint, catches up, follows
// live events, and hands each decoded event to a handler.
//
// The same [Consumer] runs projections (read models) and each saga's events
// and outbox:
//
//   - Events are decoded through a codec.Registry, so upcasters apply; a
//     stored event that splits into several values is handled part by part
//     and checkpointed only after its last part. Cairn's own records, whose
//     type names start with codec.ReservedPrefix (a command's recorded
//     rejection in an aggregate's stream, a saga's step records), decode to
//     no value: no handler sees them, and they are never dead letters. (The
//     batch consumers under a saga runner get stored events undecoded,
//     those included.)
//   - The checkpoint advances only after the handler's effect, once per batch
//     ([Options.BatchSize] events or [Options.MaxBatchDelay], whichever comes
//     first), so catch-up costs one checkpoint write per batch, not per event.
//   - A transactional consumer ([NewTx]) runs each batch and its checkpoint
//     move in one transaction of the read model's database: each event
//     counts exactly once, whatever crashes. A plain consumer ([New]) applies
//     each event at least once.
//   - A failing handler is retried with backoff, then the event is parked as
//     a dead letter and the consumer goes on (or stops: [Options.OnFailure]).
//     Dead letters can be listed, retried and skipped.
//   - With a lease store, of several processes running the same consumer only
//     the lease holder applies effects; the others wait and take over when it
//     stops or dies. The lease's fence makes a former holder's checkpoint
//     saves fail.
//   - [Consumer.Rebuild] resets a projection and replays it with progress
//     reports; [Consumer.Stats] reports lag, rate and parked count.
package projection
