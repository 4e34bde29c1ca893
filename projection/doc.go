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
//
// # Tracing and metrics
//
// A consumer traces and measures its work through [Options.TracerProvider]
// and [Options.MeterProvider] (the global providers when nil; the list of
// spans and metrics is in docs/observability.md):
//
//   - Each batch handed to the handlers (never an idle read) is a
//     `process {consumer}` span of kind CONSUMER. It is the root of a trace
//     of its own, linked to the spans its events were appended under and
//     to the span the consumer runs under, if any: a batch has many
//     origins, and belongs to none of them. While it records, each event is
//     a `handle {event type}` child span with one link, to its own event's
//     append, and the handler's context carries that span, so that the
//     handler's own spans nest under it (a batch consumer's handler gets
//     the batch span). A retry is a "retry" event of the span; an event
//     parked is a "dead_letter" event that fails its span; a batch that
//     fails fails its span. A rebuild is a `rebuild {consumer}` span that
//     its batches link to. A transactional batch that rolls back is handled
//     again event by event, each under a handle span of its own.
//   - messaging.process.duration measures each batch and
//     messaging.client.consumed.messages counts its events. The gauges
//     cairn.consumer.lag (the events after the stored checkpoint that the
//     consumer's filter selects, at most [LagCap]), cairn.consumer.lag.age
//     (the age of the oldest of them) and cairn.consumer.dead_letters are
//     read from the stores when they are collected, at most every few
//     seconds, whether the consumer runs or not: a consumer stopped, or
//     running in another process, still shows how far behind it is. They
//     are registered when the consumer is built and unregistered once it
//     is garbage (a Consumer has no Close): keep a Consumer for as long as
//     its gauges should report.
//   - Records logged inside a span carry its trace_id and span_id.
package projection
