// Command cairn is Cairn's operator command line on SQLite, PostgreSQL
// and KurrentDB stores: the commands of package cli (streams, events,
// projections, dead letters, sagas, copy, doctor) with the KurrentDB store
// added. See docs/cli.md.
//
// It is a Go module of its own, as the KurrentDB store is, so that gRPC,
// which the KurrentDB client brings, stays out of the main module's graph:
// a service on SQLite or PostgreSQL that mounts package cli in its own
// binary builds without it.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/cairn-es/cairn/cli"
)

func main() {
	// The first interrupt ends the command's context, so that a copy
	// stops between appends and says how to resume; a second one kills
	// the process, as signal.NotifyContext stops catching after its stop.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.Options{Stores: kurrentDBOpeners()})
	stop()
	os.Exit(code)
}
