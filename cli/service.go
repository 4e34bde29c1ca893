package cli

import (
	"github.com/cairn-es/cairn/codec"
)

// Service is what a service gives the command line so that the commands
// that run its code work in its binary: its codec registry (to show
// events decoded and upcast), its saga runners and its projections, all
// built on the store the command opened (see [Options.Service]).
type Service struct {
	// Registry decodes events for streams read, streams tail and events
	// find with --decode: the value as the service's code sees it today,
	// upcast. nil shows events as stored.
	Registry *codec.Registry
	// Sagas are the service's saga types, each made with [Saga].
	Sagas []SagaRunner
	// Projections are the service's projections, each made with
	// [Projection].
	Projections []ProjectionConsumer
	// Close releases what the service built (its bus, its runners); nil
	// when there is nothing to release. The command line closes the store
	// after it.
	Close func() error
}
