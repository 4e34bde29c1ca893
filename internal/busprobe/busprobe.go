// Package busprobe is what a command.Bus tells Cairn's own packages about
// itself beside its API: whether it routes a command type (a saga runner
// checks, when it is set up, that its bus routes every command type it
// sends), and how many aggregates it keeps loaded (the bus's conformance
// kit, commandtest, checks its cache). Neither is a user's business, so
// neither is in the bus's API.
//
// Package command registers the probes when it is initialised; any package
// that names *command.Bus has them linked in.
package busprobe

import "reflect"

// routes and cached are command's probes, a func(*command.Bus,
// reflect.Type) bool and a func(*command.Bus) int.
var routes, cached any

// Register is called by package command with its probes.
func Register[B any](routesFn func(bus B, ct reflect.Type) bool, cachedFn func(bus B) int) {
	routes, cached = routesFn, cachedFn
}

// Routes reports whether bus (a *command.Bus, B) routes commands of Go
// type ct.
func Routes[B any](bus B, ct reflect.Type) bool {
	return routes.(func(B, reflect.Type) bool)(bus, ct)
}

// CachedAggregates returns how many loaded aggregates bus (a
// *command.Bus, B) keeps now.
func CachedAggregates[B any](bus B) int {
	return cached.(func(B) int)(bus)
}
