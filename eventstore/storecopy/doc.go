// Package storecopy copies the events of one event store into another: to
// move a service from SQLite to PostgreSQL, to take a copy of production
// for a test, or to leave one database for another.
//
// [Copy] reads the source in global order and appends every event to the
// target with the same event ID, stream, stream version, type, schema
// version, data and metadata; the records Cairn writes for itself (saga
// streams, "cairn." types and metadata keys) are copied too. Global
// positions and recording times are the target's own: a position is a
// store's place in its log, not a property of the event.
//
// Each append is atomic, so a copy that stops half-way, however it stops,
// leaves whole appends in the target, and running it again continues: the
// copy keeps its progress in the target when the target keeps checkpoints
// (see [Options.Name]), and an append that was written but not yet recorded
// comes back as a duplicate, which the store absorbs and [Report] counts.
// A target stream that already holds other events where the source's would
// go stops the copy with a [*ConflictError]; nothing is appended after it.
//
// At the end, Copy compares every copied stream in both stores (event count
// and a SHA-256 digest of each event's content) and returns an error
// matching [ErrMismatch] when any differs.
//
// # Consumers' state and snapshots
//
// With [Options.Consumers], Copy also carries the consumers' (projections'
// and sagas') state: their checkpoints and their dead letters. A
// checkpoint is a position, and positions are each store's own, so a
// source checkpoint at P becomes the target's position of the last source
// event at or before P (the start when there is none): the consumer then
// resumes on the target with the event it would have handled next on the
// source, none skipped, none repeated. The copy writes a translated
// checkpoint once that event is in the target and before its own progress
// moves past it, so a copy that stops half-way loses none; a rerun that
// resumes past some checkpoints first reads the part of the source copied
// before once more (a rerun without Consumers never does) to translate
// them. A save expects what the target holds, so a rerun that finds a
// checkpoint in place writes nothing. Dead letters follow the events they
// refer to, each with its event's target position, its ID, part, error,
// attempts and failure times; one the target holds already is left as it
// is. Leases and retries' claims are not copied: they belong to running
// processes. The copies' own checkpoints (named CheckpointPrefix...) are
// not copied either.
//
// A copy refuses to carry the state of a consumer that holds a live
// lease in the target ([*LeasedError]): it runs there.
//
// Consumer state is copied as it is when the copy reads it: the
// checkpoints when the run begins, the dead letters after its events are
// copied. A consumer that runs meanwhile moves on in the source only. To
// move a service, copy while it runs (the bulk of the events), stop it,
// then run the copy again: the rerun carries the events appended since,
// and the consumers' state as the stopped service left it. Do not rerun a
// copy with Consumers once consumers run on the target: it would move
// their checkpoints back to the source's.
//
// With [Options.Snapshots], Copy also copies the aggregates' snapshots
// (the last save wins, so that a rerun leaves the target's alike).
package storecopy
