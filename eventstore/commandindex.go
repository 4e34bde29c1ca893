package eventstore

import "context"

// CommandIndex is an optional capability of a [Store]: finding the events
// that one command produced in a stream, by the [Metadata.CommandID] they
// carry, without reading the whole stream. The command bus uses it to
// recognize a redelivered command when the events before its snapshot are
// not in memory; a store without it is scanned instead.
type CommandIndex interface {
	// EventsByCommand returns, in version order, the events of stream whose
	// Metadata.CommandID is commandID; none when there are none or the
	// stream does not exist. An empty commandID matches nothing.
	EventsByCommand(ctx context.Context, stream, commandID string) ([]Event, error)
}
