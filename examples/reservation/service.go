package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cairn-es/cairn/cli"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/saga"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// service is one process's view of the reservation service: its store
// (the SQLite file in the data folder, or the store -store names), the
// read models in it, and a model's registry.
type service struct {
	// where names the store for people: a path, or a URL without its
	// password.
	where string
	store eventstore.Store
	rm    readModels
	reg   *codec.Registry
	model model
	log   *slog.Logger
	// tp and mp are the OpenTelemetry providers the service's components
	// take (with -trace); nil for the global ones, which do nothing until a
	// program installs an SDK.
	tp trace.TracerProvider
	mp metric.MeterProvider
}

// storeFile is the SQLite file in the data folder.
const storeFile = "reservation.db"

// openService opens the store for model m: the one storeURL names
// (sqlite:///path or postgres://..., as the cairn command line names
// stores), or when it is "" the SQLite file in folder dir, created when
// missing.
func openService(ctx context.Context, dir, storeURL string, m model) (*service, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	reg, err := m.registry()
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	store, where, err := openStore(ctx, dir, storeURL, log)
	if err != nil {
		return nil, err
	}
	rm := readModelsOf(store)
	if rm == nil {
		_ = store.Close()
		return nil, fmt.Errorf("%s: the example keeps its read models in a SQLite or PostgreSQL store", where)
	}
	return &service{where: where, store: store, rm: rm, reg: reg, model: m, log: log}, nil
}

// openStore opens the store of storeURL, or the SQLite file in dir. Two
// processes write it: the sale's appends reach this one's subscribers by
// polling (SQLite) or a notification (PostgreSQL, which polls too when one
// is lost), so poll more often than the default.
func openStore(ctx context.Context, dir, storeURL string, log *slog.Logger) (eventstore.Store, string, error) {
	const poll = 20 * time.Millisecond
	scheme, _, _ := strings.Cut(storeURL, ":")
	switch strings.ToLower(scheme) {
	case "":
		path := filepath.Join(dir, storeFile)
		s, err := sqlite.Open(ctx, path, sqlite.Options{PollInterval: poll, Logger: log})
		return s, path, err
	case "sqlite":
		path, err := cli.SQLitePath(storeURL)
		if err != nil {
			return nil, "", err
		}
		s, err := sqlite.Open(ctx, path, sqlite.Options{PollInterval: poll, Logger: log})
		return s, path, err
	case "postgres", "postgresql":
		// Named as the cairn command line names stores: ?schema= is the
		// store's, and the read models' tables go in it too.
		conn, schema, err := cli.PostgresConn(storeURL)
		if err != nil {
			return nil, "", err
		}
		s, err := postgres.Open(ctx, conn, postgres.Options{Schema: schema, PollInterval: poll, Logger: log})
		where := "PostgreSQL schema " + schema
		if u, perr := url.Parse(storeURL); perr == nil {
			where = u.Redacted() // no password in what it prints
		}
		return s, where, err
	}
	return nil, "", fmt.Errorf("store URL %q: want sqlite:///path or postgres://... (not %q)", storeURL, scheme)
}

// newBus returns a command bus for the model's commands that tells
// observe what each dispatch did.
func (s *service) newBus(observe func(context.Context, command.Observation)) (*command.Bus, error) {
	bus := command.New(s.store, s.reg, command.Options{Logger: s.log, Middleware: []command.Middleware{command.Observing(observe)},
		TracerProvider: s.tp, MeterProvider: s.mp})
	return bus, s.model.route(bus)
}

// runnerOptions are the options of the service's saga runners.
func (s *service) runnerOptions() saga.RunnerOptions {
	return saga.RunnerOptions{Logger: s.log, TracerProvider: s.tp, MeterProvider: s.mp}
}

func (s *service) close() { _ = s.store.Close() }
