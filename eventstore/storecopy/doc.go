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
// This step copies events only. Consumer state, that is projections' and
// sagas' checkpoints (whose positions would need translating into the
// target's), dead letters, leases, aggregate snapshots, is not copied:
// consumers of the target start from the beginning of its log, or are
// moved by hand.
package storecopy
