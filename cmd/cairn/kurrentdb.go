package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/cairn-es/cairn/cli"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/kurrentdb"
)

// kurrentDBOpeners are the URL schemes of the KurrentDB store's
// connection strings (kurrentdb.Open takes all four).
func kurrentDBOpeners() map[string]cli.Opener {
	return map[string]cli.Opener{
		"kurrentdb":          openKurrentDB,
		"kurrentdb+discover": openKurrentDB,
		"esdb":               openKurrentDB,
		"esdb+discover":      openKurrentDB,
	}
}

// openKurrentDB opens a KurrentDB store. The mode means nothing here:
// KurrentDB has no read-only connection (a read-only command simply
// appends nothing), and a server's database always exists (there is
// nothing to create for a copy's target). kurrentdb.Open checks the
// connection string, not the server: a server that cannot be reached
// fails the command's first call.
func openKurrentDB(ctx context.Context, url string, _ cli.Mode) (eventstore.Store, error) {
	if _, err := kurrentdb.ParseConnString(url); err != nil {
		return nil, &cli.UsageError{Msg: "store URL is not a KurrentDB connection string", Err: err}
	}
	// The client's and the store's diagnostics are for a service's logs;
	// an operator at a terminal needs the warnings only.
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return kurrentdb.Open(ctx, url, kurrentdb.Options{Logger: log})
}
