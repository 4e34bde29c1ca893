// Command machines runs production machines that send commands ("piece
// done", "stop for maintenance") through a load balancer to several servers,
// each with its own command bus, on one event store. Nothing keeps a
// machine's requests on one server or in order: they arrive shuffled,
// several at once, and some twice (the machine timed out and sent again).
//
// Each machine is an aggregate with a version. A server decides on the
// machine's state at the version it loaded, and its append expects that
// version: when another server changed the machine in between, the append is
// refused, and the bus reloads and decides again on the newer state. So
// invalid transitions are rejected with a typed error (a sensor that fires
// twice for one piece, a piece of another job, a second stop request), and
// valid ones are accepted whatever order they arrive in; the final states are
// the same for every arrival order.
//
//	go run ./examples/machines [-machines 6] [-pieces 12] [-seed 1] [-data dir]
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
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/examples/internal/datadir"
)

// config sizes a run.
type config struct {
	dataDir  string // empty: a temporary folder, removed afterwards
	machines int
	pieces   int
	servers  int
	senders  int    // requests in flight at once
	seed     uint64 // the arrival order; 0 keeps the sending order
	logger   *slog.Logger
}

func main() {
	cfg := config{servers: 3, senders: 12}
	flag.StringVar(&cfg.dataDir, "data", "", "folder for the SQLite file (default: a temporary folder, removed afterwards)")
	flag.IntVar(&cfg.machines, "machines", 6, "machines")
	flag.IntVar(&cfg.pieces, "pieces", 12, "pieces in each machine's job")
	flag.Uint64Var(&cfg.seed, "seed", 1, "arrival order (0: the order the machines sent)")
	flag.Parse()
	cfg.logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if _, err := run(context.Background(), cfg, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// report is what a run measured, for the summary and the test.
type report struct {
	requests, resent                int
	accepted, duplicates, conflicts int
	planned                         int           // stop requests accepted while the job ran
	rejected, wantRejected          map[error]int // reason -> requests
	inconsistent                    []string      // requests that got two different outcomes
	states, wantStates              map[string]string
}

func run(ctx context.Context, cfg config, out io.Writer) (report, error) {
	r := report{states: make(map[string]string)}
	dir, removeDir, err := datadir.Open(cfg.dataDir, "cairn-machines")
	if err != nil {
		return r, err
	}
	defer removeDir()
	store, err := sqlite.Open(ctx, filepath.Join(dir, "machines.db"), sqlite.Options{Logger: cfg.logger})
	if err != nil {
		return r, err
	}
	defer store.Close()
	reg := codec.NewRegistry(codec.Options{})
	err = errors.Join(
		codec.Register[JobStarted](reg, "machine.job_started", 1),
		codec.Register[PieceFinished](reg, "machine.piece_finished", 1),
		codec.Register[JobCompleted](reg, "machine.job_completed", 1),
		codec.Register[MaintenanceRequested](reg, "machine.maintenance_requested", 1),
		codec.Register[MaintenanceStarted](reg, "machine.maintenance_started", 1),
	)
	if err != nil {
		return r, err
	}
	machines, err := aggregate.NewType[Machine]("machine", aggregate.Options[Machine]{
		New: func(id string) *Machine { return &Machine{id: id} },
	}, machineBindings...)
	if err != nil {
		return r, err
	}
	servers, err := newCluster(store, reg, machines, cfg.servers, cfg.logger)
	if err != nil {
		return r, err
	}

	// Machine names get a prefix of their own per run, so that a data
	// folder can be reused.
	prefix := uuid.NewString()[:8]
	s := newScenario(prefix, cfg)
	r.wantRejected, r.wantStates = s.wantRejected, s.wantStates
	start := time.Now()
	// Each machine starts its job and waits for the answer...
	if err := sendAll(ctx, servers, s.starts, cfg.senders); err != nil {
		return r, err
	}
	// ...then its stations report pieces and operators press buttons, all
	// at once.
	if err := sendAll(ctx, servers, s.flood, cfg.senders); err != nil {
		return r, err
	}
	elapsed := time.Since(start)

	repo, err := aggregate.NewRepository(store, reg, machines, aggregate.RepositoryOptions{})
	if err != nil {
		return r, err
	}
	for _, m := range s.machines {
		inst, err := repo.Load(ctx, m)
		if err != nil {
			return r, err
		}
		r.states[strings.TrimPrefix(m, prefix+".")] = inst.State.State()
	}
	r.requests, r.resent = len(s.starts)+len(s.flood), s.resent
	r.accepted, r.duplicates, r.rejected = servers.accepted, servers.duplicates, servers.rejected
	r.conflicts, r.planned = int(servers.conflicts.Load()), int(servers.planned.Load())
	for id, outcome := range servers.outcomes {
		if strings.HasPrefix(outcome, "INCONSISTENT") {
			r.inconsistent = append(r.inconsistent, id+": "+outcome)
		}
	}

	order := "in the order sent"
	if cfg.seed != 0 {
		order = fmt.Sprintf("shuffled (seed %d)", cfg.seed)
	}
	fmt.Fprintf(out, "%d machines sent %d requests through a load balancer to %d servers, %d at a time, arriving %s; %s\n",
		cfg.machines, r.requests, cfg.servers, cfg.senders, order, elapsed.Round(time.Millisecond))
	fmt.Fprintf(out, "  accepted:               %4d  (%d jobs, %d pieces, %d stops for maintenance: %d arrived mid-job, planned for its end)\n",
		r.accepted, cfg.machines, cfg.machines*cfg.pieces, r.accepted-cfg.machines*(cfg.pieces+1), r.planned)
	fmt.Fprintf(out, "  sent twice, absorbed:   %4d  of %d sent again (same request ID: the earlier result; a rejection is decided again)\n", r.duplicates, r.resent)
	fmt.Fprintf(out, "  version conflicts:      %4d  (another server had changed the machine: reloaded, decided again)\n", r.conflicts)
	fmt.Fprintf(out, "  rejected, *TransitionError:\n")
	for _, reason := range reasons {
		fmt.Fprintf(out, "    %-48s %3d\n", reason.Error()+":", r.rejected[reason])
	}
	fmt.Fprintf(out, "final states:\n")
	names := make([]string, 0, len(r.states))
	for m := range r.states {
		names = append(names, m)
	}
	sort.Strings(names)
	for _, m := range names {
		fmt.Fprintf(out, "  %s  %s\n", m, r.states[m])
	}
	if err := r.check(); err != nil {
		return r, err
	}
	fmt.Fprintf(out, "as expected for any arrival order: every piece counted once, every invalid transition refused\n")
	return r, nil
}

// reasons are the rejections the scenario provokes, in the summary's order.
var reasons = []error{ErrPieceAlreadyDone, ErrNoSuchPiece, ErrWrongJob, ErrAlreadyStopping}

// check compares what happened with what the scenario implies whatever the
// arrival order.
func (r report) check() error {
	var errs []error
	if len(r.inconsistent) > 0 {
		errs = append(errs, fmt.Errorf("requests sent twice got two outcomes: %v", r.inconsistent))
	}
	for reason, n := range r.wantRejected {
		if r.rejected[reason] != n {
			errs = append(errs, fmt.Errorf("%d requests rejected with %q, expected %d", r.rejected[reason], reason, n))
		}
	}
	for m, want := range r.wantStates {
		if r.states[m] != want {
			errs = append(errs, fmt.Errorf("machine %s is %q, expected %q", m, r.states[m], want))
		}
	}
	return errors.Join(errs...)
}

// sendAll sends the requests from senders goroutines at once.
func sendAll(ctx context.Context, c *cluster, requests []request, senders int) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	queue := make(chan request)
	var wg sync.WaitGroup
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range queue {
				if err := c.send(ctx, r); err != nil {
					cancel(err)
					return
				}
			}
		}()
	}
	for _, r := range requests {
		select {
		case queue <- r:
		case <-ctx.Done():
		}
	}
	close(queue)
	wg.Wait()
	return context.Cause(ctx)
}

// scenario is what the machines send, and what must come of it.
type scenario struct {
	machines      []string
	starts, flood []request
	resent        int
	wantRejected  map[error]int
	wantStates    map[string]string
}

// newScenario builds the requests. Every machine has a job of cfg.pieces
// pieces, and its stations report each piece once, plus a second report of
// piece 3 (a sensor that fires twice) and a report of a piece past the end of
// the job. Odd machines also report a piece of their former job, which a slow
// network held back. Even machines get two maintenance requests, from the
// control panel and from the planner: the first to arrive is accepted (at
// once, or when the job's last piece is done), the second is refused. One
// request in five is sent again later with the same ID, as a machine does
// when its request times out.
func newScenario(prefix string, cfg config) scenario {
	s := scenario{wantRejected: make(map[error]int), wantStates: make(map[string]string)}
	req := func(cmd command.Command) request {
		return request{id: uuid.NewString(), cmd: cmd}
	}
	for i := 1; i <= cfg.machines; i++ {
		m := fmt.Sprintf("%s.m%02d", prefix, i)
		s.machines = append(s.machines, m)
		s.starts = append(s.starts, req(StartJob{Machine: m, Job: "J1", Pieces: cfg.pieces}))
		for p := 1; p <= cfg.pieces; p++ {
			s.flood = append(s.flood, req(PieceDone{Machine: m, Job: "J1", Piece: p}))
		}
		s.flood = append(s.flood,
			req(PieceDone{Machine: m, Job: "J1", Piece: min(3, cfg.pieces)}),
			req(PieceDone{Machine: m, Job: "J1", Piece: cfg.pieces + 1}),
		)
		s.wantRejected[ErrPieceAlreadyDone]++
		s.wantRejected[ErrNoSuchPiece]++
		short := fmt.Sprintf("m%02d", i)
		if i%2 == 1 {
			s.flood = append(s.flood, req(PieceDone{Machine: m, Job: "J0", Piece: 1}))
			s.wantRejected[ErrWrongJob]++
			s.wantStates[short] = fmt.Sprintf("idle after J1 %d/%d", cfg.pieces, cfg.pieces)
		} else {
			s.flood = append(s.flood,
				req(StopForMaintenance{Machine: m, By: "panel"}),
				req(StopForMaintenance{Machine: m, By: "planner"}),
			)
			s.wantRejected[ErrAlreadyStopping]++
			s.wantStates[short] = fmt.Sprintf("in maintenance after J1 %d/%d", cfg.pieces, cfg.pieces)
		}
	}
	rng := rand.New(rand.NewPCG(cfg.seed, cfg.seed))
	if cfg.seed != 0 {
		rng.Shuffle(len(s.flood), func(i, j int) { s.flood[i], s.flood[j] = s.flood[j], s.flood[i] })
	}
	// later[j] are the requests sent again just before the j-th original.
	later := make(map[int][]request)
	for i := 0; i < len(s.flood); i += 5 {
		at := i + 1 + rng.IntN(len(s.flood)-i)
		later[at] = append(later[at], s.flood[i])
		s.resent++
	}
	var flood []request
	for j := 0; j <= len(s.flood); j++ {
		flood = append(flood, later[j]...)
		if j < len(s.flood) {
			flood = append(flood, s.flood[j])
		}
	}
	s.flood = flood
	return s
}
