// Command topic subscribes to another service's reliable topic (a carrier's
// parcel scans) and feeds it to a saga with Runner.Deliver, each message with
// its source and sequence. The subscriber's connection drops, and the new
// session resumes after the last offset it acknowledged, so the messages in
// between come again: the saga's watermarks drop them. The carrier retried
// one failed publish after the parcel's next message had gone out, so the
// parcel's sequence 3 arrives before its sequence 2: the saga holds it,
// Runner.Gaps reports the gap until sequence 2 arrives, and then both are
// handled in order. The saga's commands update our orders, which refuse a
// stage out of order: every order ends with each stage once, in order.
//
//	go run ./examples/topic [-parcels 24] [-seed 1] [-data dir]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/examples/internal/datadir"
	"github.com/cairn-es/cairn/saga"
)

// config sizes a run.
type config struct {
	dataDir string // empty: a temporary folder, removed afterwards
	parcels int
	seed    uint64
	logger  *slog.Logger
}

func main() {
	var cfg config
	flag.StringVar(&cfg.dataDir, "data", "", "folder for the SQLite file (default: a temporary folder, removed afterwards)")
	flag.IntVar(&cfg.parcels, "parcels", 24, "parcels (four messages each)")
	flag.Uint64Var(&cfg.seed, "seed", 1, "how the carrier interleaves the parcels' messages")
	flag.Parse()
	cfg.logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if _, err := run(context.Background(), cfg, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// report is what a run measured, for the summary and the test.
type report struct {
	messages, deliveries, sessions int
	late, overtaken                uint64 // offsets of the retried publish and of the message that overtook it
	lateParcel                     string
	droppedAfter, resumedAfter     uint64
	outcomes                       map[saga.Outcome]int
	stats                          saga.Stats
	gapOpened, gapFilled           uint64
	gap                            saga.Gap
	history                        []string // the late parcel's steps
	applied, refused               int      // the orders' commands
	ordersInOrder                  int      // orders with every stage once, in order
}

func run(ctx context.Context, cfg config, out io.Writer) (report, error) {
	r := report{outcomes: make(map[saga.Outcome]int)}
	dir, removeDir, err := datadir.Open(cfg.dataDir, "cairn-topic")
	if err != nil {
		return r, err
	}
	defer removeDir()
	store, err := sqlite.Open(ctx, filepath.Join(dir, "topic.db"), sqlite.Options{Logger: cfg.logger})
	if err != nil {
		return r, err
	}
	defer store.Close()

	reg := codec.NewRegistry(codec.Options{})
	err = errors.Join(
		codec.Register[ParcelScanned](reg, "carrier.parcel_scanned", 1),
		codec.Register[TrackParcel](reg, "order.track_parcel", 1),
		codec.Register[ParcelTracked](reg, "order.parcel_tracked", 1),
		codec.Register[Tracking](reg, "tracking.state", 1),
	)
	if err != nil {
		return r, err
	}
	orders, err := aggregate.NewType[Order]("order", aggregate.Options[Order]{},
		aggregate.Handles((*Order).Track), aggregate.Applies((*Order).Tracked))
	if err != nil {
		return r, err
	}
	var applied, refused atomic.Int64
	counting := command.Observing(func(_ context.Context, o command.Observation) {
		switch {
		case o.Result.Rejected && !o.Result.Duplicate:
			refused.Add(1)
		case o.Err == nil && !o.Result.Duplicate:
			applied.Add(1)
		}
	})
	bus := command.New(store, reg, command.Options{Middleware: []command.Middleware{counting}, Logger: cfg.logger})
	if err := command.Route[TrackParcel](bus, orders); err != nil {
		return r, err
	}
	tracking, err := saga.New[Tracking]("tracking", reg, saga.Options[Tracking]{})
	if err != nil {
		return r, err
	}
	if err := declareTracking(tracking); err != nil {
		return r, err
	}
	runner, err := saga.NewRunner(tracking, store, bus, saga.RunnerOptions{Logger: cfg.logger})
	if err != nil {
		return r, err
	}
	// The runner's outbox sends the commands the steps record, live.
	live, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- runner.Run(live) }()

	// Parcels and orders get a prefix of their own per run, so that a data
	// folder can be reused.
	prefix := uuid.NewString()[:8]
	t := publish("carrier.parcels", prefix, cfg.parcels, rand.New(rand.NewPCG(cfg.seed, cfg.seed)))
	r.messages, r.late, r.overtaken = len(t.messages), t.late, t.overtaken
	r.lateParcel = t.messages[t.late-1].Event.Parcel
	r.droppedAfter = t.dropPoint()
	sub := &subscriber{topic: t, runner: runner, outcomes: r.outcomes}
	start := time.Now()
	if _, err := sub.session(ctx, r.droppedAfter); err != nil {
		stop()
		return r, err
	}
	r.resumedAfter, err = sub.session(ctx, 0)
	if err != nil {
		stop()
		return r, err
	}
	stop()
	if err := <-ran; err != nil {
		return r, err
	}
	// Whatever the live outbox had not sent yet.
	if err := runner.CatchUp(ctx); err != nil {
		return r, err
	}
	elapsed := time.Since(start)
	r.deliveries, r.sessions = sub.deliveries, sub.sessions
	r.gapOpened, r.gapFilled, r.gap = sub.gapOpened, sub.gapFilled, sub.gapSeen
	r.applied, r.refused = int(applied.Load()), int(refused.Load())
	if r.stats, err = runner.Stats(ctx); err != nil {
		return r, err
	}
	for step, err := range runner.History(ctx, r.lateParcel) {
		if err != nil {
			return r, err
		}
		r.history = append(r.history, fmt.Sprintf("seq %d %s", step.Sequence, step.Kind))
	}
	repo, err := aggregate.NewRepository(store, reg, orders, aggregate.RepositoryOptions{})
	if err != nil {
		return r, err
	}
	for p := range cfg.parcels {
		inst, err := repo.Load(ctx, fmt.Sprintf("%s.o%02d", prefix, p+1))
		if err != nil {
			return r, err
		}
		if slices.Equal(inst.State.Stages, []int{0, 1, 2, 3}) {
			r.ordersInOrder++
		}
	}

	short := strings.TrimPrefix(r.lateParcel, prefix+".")
	fmt.Fprintf(out, "topic %s: %d parcels, %d messages; %s's \"out for delivery\" (seq 2) was published again at offset %d, after its \"delivered\" (seq 3) at offset %d\n",
		t.name, cfg.parcels, r.messages, short, r.late, r.overtaken)
	fmt.Fprintf(out, "subscriber: the connection dropped after offset %d; the next session resumed after the last acknowledged offset, %d: %d deliveries in %s\n",
		r.droppedAfter, r.resumedAfter, r.deliveries, elapsed.Round(time.Millisecond))
	fmt.Fprintf(out, "saga (Runner.Deliver with source %q and the parcel's sequence):\n", t.name)
	fmt.Fprintf(out, "  handled:              %4d  (one step each)\n", r.stats.Handled)
	fmt.Fprintf(out, "  duplicates absorbed:  %4d  (delivered again after the reconnect)\n", r.stats.Duplicates)
	fmt.Fprintf(out, "  held:                 %4d  (arrived before a missing sequence)\n", r.stats.Held)
	if r.gapOpened != 0 {
		fmt.Fprintf(out, "  gap: Runner.Gaps listed %s waiting for seq %d of %s (%d held) from offset %d until offset %d, then none\n",
			strings.TrimPrefix(r.gap.Instance, prefix+"."), r.gap.WaitsFor, r.gap.Source, r.gap.Held, r.gapOpened, r.gapFilled)
	}
	fmt.Fprintf(out, "  %s's steps: %s\n", short, strings.Join(r.history, ", "))
	fmt.Fprintf(out, "orders (the saga's commands, sent by its outbox): %d applied, %d refused as out of order\n", r.applied, r.refused)

	switch {
	case r.gapOpened == 0 || r.gapFilled == 0:
		return r, fmt.Errorf("the late message opened no gap that then filled (opened after offset %d, filled after %d)", r.gapOpened, r.gapFilled)
	case r.stats.Handled != int64(r.messages) || r.applied != r.messages || r.refused != 0:
		return r, fmt.Errorf("%d messages: %d handled by the saga, %d commands applied, %d refused", r.messages, r.stats.Handled, r.applied, r.refused)
	case r.stats.Duplicates == 0 || int(r.stats.Duplicates) != r.deliveries-r.messages:
		return r, fmt.Errorf("%d deliveries of %d messages, %d duplicates absorbed", r.deliveries, r.messages, r.stats.Duplicates)
	case r.ordersInOrder != cfg.parcels:
		return r, fmt.Errorf("%d of %d orders have every stage once, in order", r.ordersInOrder, cfg.parcels)
	}
	fmt.Fprintf(out, "exactly once, in order: all %d orders went through the %d stages once each, in order\n", r.ordersInOrder, len(stages))
	return r, nil
}
