package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/cairn-es/cairn/cli"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/examples/reservation/domain"
	v2 "github.com/cairn-es/cairn/examples/reservation/v2"
	"github.com/cairn-es/cairn/saga"
)

// modelEnv names the version of the code that admin mounts (v1 unless it
// says v2): it must be the one that wrote the store, or a later one.
const modelEnv = "RESERVATION_MODEL"

// admin runs the cairn command line with the example's types mounted:
//
//	go run ./examples/reservation admin --store sqlite:///path/reservation.db sagas parked sale
//
// so that the commands that run the service's code (sagas explain, retry,
// skip, release, redrive; events decoded) run this program's.
func admin(ctx context.Context, args []string) int {
	return cli.Main(ctx, args, cli.Options{Name: "reservation admin", Service: mount})
}

// mount builds the service on the store the command opened: the model's
// registry, its two read models' projections (which projections rebuild
// empties and replays), and a runner of its Sale saga with a bus that routes its
// commands (a retried step's commands are sent by the outbox of the sale
// process, which runs; this runner only records them).
func mount(ctx context.Context, store eventstore.Store) (*cli.Service, error) {
	name := os.Getenv(modelEnv)
	if name == "" {
		name = modelV1.name
	}
	m, err := modelNamed(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", modelEnv, err)
	}
	reg, err := m.registry()
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	svc := &service{where: "admin", store: store, rm: readModelsOf(store), reg: reg, model: m, log: log}
	if svc.rm == nil {
		return nil, fmt.Errorf("the example keeps its read models in a SQLite or PostgreSQL store, not in a %T", store)
	}
	bus, err := svc.newBus(func(context.Context, command.Observation) {})
	if err != nil {
		return nil, err
	}
	sale, err := saleRunner(m, reg, store, bus, svc.runnerOptions(), defaultWindow)
	if err != nil {
		return nil, err
	}
	b, err := newBoard(ctx, svc)
	if err != nil {
		return nil, err
	}
	nr, err := newNotReserved(ctx, svc)
	if err != nil {
		return nil, err
	}
	return &cli.Service{
		Registry:    reg,
		Sagas:       []cli.SagaRunner{sale},
		Projections: []cli.ProjectionConsumer{svc.rm.mount(b.consumer, "sales_board"), svc.rm.mount(nr.consumer, "not_reserved")},
	}, nil
}

// defaultWindow is the sale's payment window unless -payment-window says
// otherwise; admin decides with it when a retried step schedules one.
const defaultWindow = 2 * time.Second

// saleRunner makes the model's Sale saga runner for the command line.
func saleRunner(m model, reg *codec.Registry, store eventstore.Store, bus *command.Bus, opts saga.RunnerOptions, window time.Duration) (cli.SagaRunner, error) {
	switch m.name {
	case modelV2.name:
		t, err := v2.NewSale(reg, domain.SaleOptions{PaymentWindow: window})
		return mountSale(t, err, store, bus, opts)
	default:
		t, err := domain.NewSale(reg, domain.SaleOptions{PaymentWindow: window})
		return mountSale(t, err, store, bus, opts)
	}
}

// mountSale makes a runner of sale type t (whose state differs between
// the models) for the command line, unless making t failed (err).
func mountSale[S any](t *saga.Type[S], err error, store eventstore.Store, bus *command.Bus, opts saga.RunnerOptions) (cli.SagaRunner, error) {
	if err != nil {
		return nil, err
	}
	r, err := saga.NewRunner(t, store, bus, opts)
	if err != nil {
		return nil, err
	}
	return cli.Saga(r), nil
}
