// Package busroutes lets a component that sends commands through a
// command.Bus (a saga runner) check, when it is set up, that the bus routes
// every command type it sends. The check is Cairn's own business, so it
// stays out of the bus's API.
//
// Package command registers the check when it is initialised; any package
// that names *command.Bus has it linked in.
package busroutes

import "reflect"

// routes is command's check, a func(*command.Bus, reflect.Type) bool.
var routes any

// Register is called by package command with its check.
func Register[B any](f func(bus B, ct reflect.Type) bool) { routes = f }

// Routes reports whether bus (a *command.Bus, B) routes commands of Go
// type ct.
func Routes[B any](bus B, ct reflect.Type) bool {
	return routes.(func(B, reflect.Type) bool)(bus, ct)
}
