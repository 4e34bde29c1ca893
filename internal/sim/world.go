package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/internal/backoff"
	"github.com/cairn-es/cairn/internal/reservation"
	"github.com/cairn-es/cairn/saga"
	"github.com/cairn-es/cairn/saga/sagatest"
)

// DefaultOrders is how many orders a seed places.
const DefaultOrders = 100

// Sabotage is a deliberately broken behaviour of the delivery bridge, for
// the tests that prove the checks catch what they claim to.
type Sabotage int

const (
	// NoSabotage runs the bridge as it should be.
	NoSabotage Sabotage = iota
	// SkipEvent acknowledges one stored SeatsReserved without handing it to
	// the runner: an event lost between the store and the saga.
	SkipEvent
	// RewriteSequences hands every redelivered stored event over with a new
	// version, as a bridge that renumbers messages would: the instances'
	// watermarks no longer recognise it.
	RewriteSequences
)

// Config is one run of the simulation. The zero value, with a seed, is the
// full run.
type Config struct {
	Seed uint64
	// Orders is how many orders are placed; zero means DefaultOrders.
	Orders int
	// Only, when set, places only these of the orders (indexes below
	// Orders), each with the inputs it has in the full run: for shrinking.
	Only []int
	// Disabled are fault kinds that never happen.
	Disabled Kinds
	// LimitFaults restricts faults to the opportunities in Allowed (see
	// Result.Faulted): for shrinking.
	LimitFaults bool
	Allowed     []int
	// Trace keeps every line of the run's trace in Result.Trace.
	Trace bool
	// Sabotage breaks the delivery bridge on purpose.
	Sabotage Sabotage
}

func (c Config) orders() int {
	if c.Orders <= 0 {
		return DefaultOrders
	}
	return c.Orders
}

// Result is what one run found.
type Result struct {
	Config Config
	// Violations are the checks that failed; none for a valid run.
	Violations []string
	// Hash identifies the run's trace and the store it left: the same seed
	// and config give the same hash.
	Hash string
	// Trace is the run's trace, when Config.Trace asked for it.
	Trace []string
	// Faulted are the fault opportunities that faulted.
	Faulted []int
	Stats   Stats
}

// Valid reports whether every check passed.
func (r *Result) Valid() bool { return len(r.Violations) == 0 }

// Stats are one run's figures; [Totals] adds them up over seeds.
type Stats struct {
	// Orders are the orders checked, Confirmed and Rejected how they
	// ended.
	Orders, Confirmed, Rejected int
	// TimedOut counts the orders whose payment deadline fired before their
	// payment's outcome reached the sale; SettledInTime and SettledLate the
	// provider's settlements that came before and after it.
	TimedOut, SettledInTime, SettledLate int
	// Faults are the faults injected, by kind.
	Faults   [numKinds]int
	Commands Commands
	// DuplicatesAbsorbed counts the messages the instances dropped as
	// duplicates and the commands the bus answered from their earlier
	// effect; ReordersRepaired the early messages held until their turn;
	// Crashes the restarts of the whole process.
	DuplicatesAbsorbed, ReordersRepaired, Crashes int
	// Steps are the saga steps stored, Ticks the ticks run.
	Steps, Ticks int
}

// Commands account for the commands of a run, Jepsen-style: Attempted are
// the commands sent (the sagas' recorded commands and the placed orders);
// Acknowledged got a final answer from the bus (done, or refused by their
// aggregate); Applied took effect (their events are stored, or the
// rejection their aggregate's refusal recorded); Lost were attempted and
// never applied; Duplicated took effect more than once; Unexpected are
// stored effects of commands that no one sent.
type Commands struct {
	Attempted, Acknowledged, Applied, Lost, Duplicated, Unexpected int
}

// order is one order of the workload.
type order struct {
	index int
	id    string
	in    reservation.Inputs
	// placeAt is the tick at which it is placed; placed says it was.
	placeAt int
	placed  bool
	// offset is when, after its payment went pending, the payment provider
	// settles it (Settled orders only).
	offset time.Duration
	// early says the provider's second message comes before its first.
	early bool
}

// world is one run: the store that survives everything, the process that
// crashes, and the sources around them.
type world struct {
	cfg      Config
	ctx      context.Context
	work     *rand.Rand // the workload's choices, apart from the faults'
	inj      *injector
	clock    *sagatest.Clock
	start    time.Time
	tick     int
	draining bool

	mem         *memory.Store
	store       *faultStore
	checkpoints *faultCheckpoints
	reg         *codec.Registry
	sale        *saga.Type[reservation.Sale]
	log         *slog.Logger

	proc     *process
	bridge   bridge
	outbox   outbox
	psp      psp
	observed eventstore.Position
	logEnd   eventstore.Position
	orders   []*order
	byID     map[string]*order
	cmds     map[string]*sentCommand
	stats    Stats

	hash       hash.Hash
	trace      []string
	violations []string
}

// process is what a crash throws away: the command bus and the saga runner
// with their caches and the runner's deadline index. The bridge and the
// outbox dispatcher restart with it (see world.crash).
type process struct {
	bus    *command.Bus
	runner *saga.Runner[reservation.Sale]
}

// sentCommand is what the bus told the simulation about one command ID.
type sentCommand struct {
	attempts           int
	acknowledged       bool
	rejected, absorbed bool
}

// Run runs one seed: the workload under faults, then a drain without
// faults, then the checks. The error is a failure of the simulation
// itself; what the code under test got wrong is in Result.Violations.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	w := &world{cfg: cfg, ctx: ctx, hash: sha256.New(), byID: make(map[string]*order), cmds: make(map[string]*sentCommand),
		work: rand.New(rand.NewPCG(cfg.Seed, 0x5a6a)), log: slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError + 1}))}
	w.inj = &injector{rng: rand.New(rand.NewPCG(cfg.Seed, 0xfa17)), on: true, disabled: cfg.Disabled, trace: w.tracef}
	if cfg.LimitFaults {
		w.inj.allowed = make(map[int]bool, len(cfg.Allowed))
		for _, n := range cfg.Allowed {
			w.inj.allowed[n] = true
		}
	}
	w.start = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	w.clock = sagatest.NewClock(w.start)
	w.mem = memory.New()
	defer func() { _ = w.mem.Close() }()
	w.store = &faultStore{Store: w.mem, inj: w.inj}
	w.checkpoints = &faultCheckpoints{Consumers: memory.NewConsumers(), inj: w.inj}
	w.reg = codec.NewRegistry(codec.Options{})
	if err := reservation.Register(w.reg); err != nil {
		return nil, err
	}
	var err error
	if w.sale, err = reservation.NewSale(w.reg); err != nil {
		return nil, err
	}
	w.plan()
	if err := w.restart(); err != nil {
		return nil, err
	}
	if err := w.run(); err != nil {
		return nil, err
	}
	if err := w.check(); err != nil {
		return nil, err
	}
	if st, err := w.proc.runner.Stats(ctx); err == nil {
		w.stats.DuplicatesAbsorbed += int(st.Duplicates)
	}
	if err := w.hashStore(); err != nil {
		return nil, err
	}
	res := &Result{Config: cfg, Violations: w.violations, Hash: hex.EncodeToString(w.hash.Sum(nil)), Trace: w.trace,
		Faulted: w.inj.faulted, Stats: w.stats}
	res.Stats.Faults = w.inj.counts
	res.Stats.Ticks = w.tick
	return res, nil
}

// plan draws the orders: their inputs and when they are placed. Every
// order's draws are the same whichever orders a run places.
func (w *world) plan() {
	only := map[int]bool{}
	for _, i := range w.cfg.Only {
		only[i] = true
	}
	at := 0
	for i := range w.cfg.orders() {
		o := &order{index: i, id: fmt.Sprintf("o%03d", i)}
		o.in.Seats = 1 + w.work.IntN(reservation.MaxSeats)
		amount := 1 + w.work.IntN(reservation.MaxAmount)
		if amount%7 == 0 {
			amount++
		}
		switch kind := w.work.IntN(100); {
		case kind < 10: // seat shortage
			o.in.Seats = reservation.MaxSeats + 1 + w.work.IntN(5)
		case kind < 20: // the payment is refused
			amount = reservation.MaxAmount + 1 + w.work.IntN(1000)
		case kind < 30: // the payment stays pending: the deadline rejects the order
			amount = 7 * (1 + w.work.IntN(reservation.MaxAmount/7))
		case kind < 55: // pending, then settled by the provider around the deadline
			amount = 7 * (1 + w.work.IntN(reservation.MaxAmount/7))
			o.in.Settled = true
		}
		o.in.Amount = amount
		// The provider settles within four minutes either side of the
		// payment window, from when the payment went pending.
		o.offset = reservation.PaymentWindow + time.Duration(w.work.IntN(480)-240)*time.Second
		o.early = w.work.IntN(2) == 0
		at += w.work.IntN(2)
		o.placeAt = at
		if len(only) == 0 || only[i] {
			w.orders = append(w.orders, o)
			w.byID[o.id] = o
		}
	}
}

// restart starts the process (again): a new bus and runner on the same
// store, which read their deadlines back from it; the bridge and the
// outbox dispatcher resume after their checkpoints.
func (w *world) restart() error {
	if w.proc != nil {
		if st, err := w.proc.runner.Stats(w.ctx); err == nil {
			w.stats.DuplicatesAbsorbed += int(st.Duplicates)
		}
	}
	tiny := backoff.Policy{Initial: time.Microsecond, Max: time.Microsecond}
	bus := command.New(w.store, w.reg, command.Options{Logger: w.log, Backoff: tiny, Middleware: []command.Middleware{w.track}})
	if err := reservation.Route(bus); err != nil {
		return err
	}
	r, err := saga.NewRunner(w.sale, w.store, bus, saga.RunnerOptions{Clock: w.clock, Workers: 1, Logger: w.log,
		Checkpoints: w.checkpoints, Retry: tiny, Attempts: 3})
	if err != nil {
		return err
	}
	if err := r.LoadDeadlines(w.ctx); err != nil {
		return err
	}
	w.proc = &process{bus: bus, runner: r}
	w.bridge.reset()
	w.outbox.reset()
	return nil
}

// crash kills the process at this point and starts a new one.
func (w *world) crash(why string) error {
	w.stats.Crashes++
	w.tracef("crash (%s): the process restarts", why)
	return w.restart()
}

// track is the bus middleware that tells the simulation what became of
// each command.
func (w *world) track(next command.Handler) command.Handler {
	return command.HandlerFunc(func(ctx context.Context, msg *command.Message) (command.Result, error) {
		res, err := next.Dispatch(ctx, msg)
		c := w.cmds[msg.ID]
		if c == nil {
			c = &sentCommand{}
			w.cmds[msg.ID] = c
		}
		c.attempts++
		if err == nil || res.Rejected {
			c.acknowledged = true
			c.rejected = c.rejected || res.Rejected
		}
		if err == nil && res.Duplicate {
			c.absorbed = true
			w.stats.DuplicatesAbsorbed++
		}
		return res, err
	})
}

// failed looks at an operation's error: one the simulation injected may
// be followed by a crash of the process right there (the kind given);
// any other is a finding.
func (w *world) failed(op string, err error, crash Kind) (crashed bool, _ error) {
	w.tracef("%s: error: %v", op, err)
	if !errors.Is(err, ErrInjected) {
		w.violate("%s failed on its own: %v", op, err)
	}
	if f, _ := w.inj.fault(crash); f {
		return true, w.crash(crash.String() + " after " + op)
	}
	return false, nil
}

// violate records a failed check, once per text.
func (w *world) violate(format string, args ...any) {
	v := fmt.Sprintf(format, args...)
	for _, seen := range w.violations {
		if seen == v {
			return
		}
	}
	if len(w.violations) < 50 {
		w.violations = append(w.violations, v)
	}
}

// tracef adds a line to the trace: to the hash always, to the kept trace
// when asked. Lines carry the tick and the simulated time, never a wall
// clock reading or a random ID.
func (w *world) tracef(format string, args ...any) {
	line := fmt.Sprintf("t%d +%s ", w.tick, w.clock.Now().Sub(w.start)) + fmt.Sprintf(format, args...)
	w.hash.Write([]byte(line))
	w.hash.Write([]byte{'\n'})
	if w.cfg.Trace {
		w.trace = append(w.trace, line)
	}
}

// hashStore adds what the store holds at the end to the hash: every
// event's stream, version and type, in log order.
func (w *world) hashStore() error {
	for ev, err := range w.mem.ReadAll(w.ctx, eventstore.Start, eventstore.Filter{}) {
		if err != nil {
			return err
		}
		fmt.Fprintf(w.hash, "%s#%d %s\n", ev.StreamID, ev.Version, ev.Type)
	}
	return nil
}
