package command

import (
	"errors"
	"fmt"
)

var (
	// ErrNoRoute matches every [*NoRouteError].
	ErrNoRoute = errors.New("command: no route")
	// ErrDuplicateRoute matches every [*RouteError]: a set-up mistake.
	ErrDuplicateRoute = errors.New("command: conflicting route")
)

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

// RouteError reports a route that conflicts with one set up before.
type RouteError struct {
	// CommandType is the command's Go type, as %T prints it.
	CommandType string
	// Aggregate is the aggregate type the route was for.
	Aggregate string
	// Reason says what it conflicts with.
	Reason string
}

// Error implements error.
func (e *RouteError) Error() string {
	return fmt.Sprintf("command: route %s to aggregate %q: %s", e.CommandType, e.Aggregate, e.Reason)
}

// Is makes errors.Is(err, ErrDuplicateRoute) true.
func (e *RouteError) Is(target error) bool { return target == ErrDuplicateRoute }
