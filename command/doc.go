// Package command is Cairn's command bus: it routes each command type to one
// aggregate type, loads the target aggregate, lets it decide, and appends
// the decision with the loaded version as the expected version.
//
// The bus gives every command an exactly-once effect on its aggregate, across
// redeliveries, crashes and processes sharing a store:
//
//   - Every dispatch has a command ID (the caller's, such as the ID of the
//     queue message it came from; a new one when absent). It is recorded in
//     the metadata of the events the command produced, in the same append,
//     and those events get IDs derived from it.
//   - Before deciding, the bus looks for the command ID in the aggregate's
//     stream. A command that already produced events returns the earlier
//     result, flagged Duplicate, and appends nothing.
//   - An append that meets a newer stream (another process, or a stale
//     cache) fails its version check; the bus reloads, looks for the command
//     ID again and decides again, a bounded number of times with jittered
//     backoff. Two processes racing on one command ID therefore end with one
//     effect: the loser finds the winner's events.
//   - The bus keeps the aggregates it loaded (Options.CacheSize) and decides
//     on a cached state without reading the stream first: the append's
//     version check catches a state that another process has moved past. A
//     decision that appends nothing (a rejection, an accepted no-op) has no
//     such check, so the bus brings the cached state up to date with the
//     stream and decides again before it returns one.
//   - A rejection writes nothing, so a command ID that comes back is decided
//     again. A sender that needs one final outcome per command ID (a saga's
//     outbox) sets Message.RecordRejection: the rejection is then appended
//     to the aggregate's stream as one event of Cairn's own, at the loaded
//     version like any decision, and every later dispatch of the ID returns
//     it as a [*RecordedRejectionError], never a later success.
//
// Within one bus, commands for one aggregate run one at a time, which saves
// needless conflicts; correctness does not depend on it.
//
// Every Dispatch is an OpenTelemetry span, `dispatch {command type}`, with
// the middleware inside it; while it records, the load, the decision and
// the append are its children, each retry after a version conflict is a
// "retry" event on it, and the appended events record the append span's
// trace context in their metadata, so that whoever handles them links back
// to the command. The bus counts commands by outcome (cairn.commands),
// retries (cairn.command.retries) and times dispatches
// (cairn.command.duration). A command type is named by the codec when it
// is registered there, else by its Go type. docs/observability.md lists
// every span, attribute and metric.
package command
