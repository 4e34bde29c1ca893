package command

import (
	"errors"
	"fmt"
)

var (
	// ErrNoRoute matches every [*NoRouteError].
	ErrNoRoute = errors.New("command: no route")
	// ErrDuplicateRoute matches every [*RouteError]: a set-up mistake (the
	// name is historic: not every one is a duplicate).
	ErrDuplicateRoute = errors.New("command: conflicting route")
	// ErrContention matches every [*ContentionError]: a command that kept
	// losing races for its aggregate until the bus gave up.
	ErrContention = errors.New("command: contention")
	// ErrCommandIDReused matches every [*CommandIDReusedError].
	ErrCommandIDReused = errors.New("command: command ID used by another command")
)

// CommandIDReusedError reports a command whose ID already produced an
// outcome in its aggregate's stream for a command of another type: the
// bus refuses it, rather than answer it with the other command's outcome
// as a duplicate (a sender that chose its own IDs could otherwise preempt
// a saga's command with one of its own). Nothing was appended. A command
// ID is scoped to its aggregate: the bus finds an ID's earlier outcome in
// the stream the command goes to, so the same ID sent to another aggregate
// is another command there. Command types are named by the codec (a type
// renamed by an upcaster keeps its older names): the bus tells apart only
// commands whose types its registry knows, and events recorded before
// command types were recorded with them are not told apart.
type CommandIDReusedError struct {
	// CommandID is the ID, Stream the aggregate's stream, and Version the
	// version of the first event of the earlier command.
	CommandID, Stream string
	Version           uint64
	// Recorded is the earlier command's type and Command this one's, as the
	// codec names them.
	Recorded, Command string
}

// Error implements error.
func (e *CommandIDReusedError) Error() string {
	return fmt.Sprintf("command %q (%s) on stream %q: the ID already produced version %d for a command of another type (%s)",
		e.CommandID, e.Command, e.Stream, e.Version, e.Recorded)
}

// Is makes errors.Is(err, ErrCommandIDReused) true.
func (e *CommandIDReusedError) Is(target error) bool { return target == ErrCommandIDReused }

// ContentionError reports a command that the bus decided Retry.Attempts
// times, each time losing the race to append to its aggregate's stream to
// another writer (another process). Nothing of it was appended. It wraps
// the last conflict, so errors.Is(err, eventstore.ErrWrongVersion) holds
// and errors.As finds the store's [*eventstore.WrongVersionError]; the
// command can be dispatched again with the same ID.
type ContentionError struct {
	// Stream is the aggregate's stream.
	Stream string
	// CommandID is the command's ID.
	CommandID string
	// Attempts is how many times the command was decided.
	Attempts int
	// Err is the last conflict.
	Err error
}

// Error implements error.
func (e *ContentionError) Error() string {
	return fmt.Sprintf("command %q on stream %q: gave up after %d attempts, each losing a concurrent append: %v",
		e.CommandID, e.Stream, e.Attempts, e.Err)
}

// Is makes errors.Is(err, ErrContention) true.
func (e *ContentionError) Is(target error) bool { return target == ErrContention }

// Unwrap returns the last conflict.
func (e *ContentionError) Unwrap() error { return e.Err }

// NoRouteError reports a dispatched command whose Go type has no route.
type NoRouteError struct {
	// CommandType is the command's Go type, as %T prints it.
	CommandType string
}

// Error implements error.
func (e *NoRouteError) Error() string {
	return fmt.Sprintf("command: no route for command type %s", e.CommandType)
}

// Is makes errors.Is(err, ErrNoRoute) true.
func (e *NoRouteError) Is(target error) bool { return target == ErrNoRoute }

// RouteError reports a route that conflicts with one set up before, or
// that its aggregate type cannot serve.
type RouteError struct {
	// CommandType is the command's Go type, as %T prints it.
	CommandType string
	// Aggregate is the aggregate type the route was for.
	Aggregate string
	// Reason says what it conflicts with.
	Reason string
	// Err is a more specific sentinel, if any, such as
	// aggregate.ErrNoHandler.
	Err error
}

// Error implements error.
func (e *RouteError) Error() string {
	return fmt.Sprintf("command: route %s to aggregate %q: %s", e.CommandType, e.Aggregate, e.Reason)
}

// Is makes errors.Is(err, ErrDuplicateRoute) true.
func (e *RouteError) Is(target error) bool { return target == ErrDuplicateRoute }

// Unwrap returns Err.
func (e *RouteError) Unwrap() error { return e.Err }
