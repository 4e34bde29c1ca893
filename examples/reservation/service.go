package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore/sqlite"
)

// service is one process's view of the reservation service: the store in
// the data folder, and a model's registry.
type service struct {
	path  string
	store *sqlite.Store
	reg   *codec.Registry
	model model
	log   *slog.Logger
}

// storeFile is the SQLite file in the data folder.
const storeFile = "reservation.db"

// openService opens (creating it when missing) the store in folder dir
// for model m.
func openService(ctx context.Context, dir string, m model) (*service, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	reg, err := m.registry()
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	path := filepath.Join(dir, storeFile)
	// Two processes write the file: the sale's appends reach this one's
	// subscribers by polling, so poll more often than the default.
	store, err := sqlite.Open(ctx, path, sqlite.Options{PollInterval: 20 * time.Millisecond, Logger: log})
	if err != nil {
		return nil, err
	}
	return &service{path: path, store: store, reg: reg, model: m, log: log}, nil
}

// newBus returns a command bus for the model's commands that tells
// observe what each dispatch did.
func (s *service) newBus(observe func(context.Context, command.Observation)) (*command.Bus, error) {
	bus := command.New(s.store, s.reg, command.Options{Logger: s.log, Middleware: []command.Middleware{command.Observing(observe)}})
	return bus, s.model.route(bus)
}

func (s *service) close() { _ = s.store.Close() }
