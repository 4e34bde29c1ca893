package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/examples/reservation/domain"
	"github.com/cairn-es/cairn/internal/testrig/reservation"
	"github.com/cairn-es/cairn/retry"
	"github.com/cairn-es/cairn/saga"
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

// Workload is what a run simulates.
type Workload int

const (
	// Sales runs the reservation flow (internal/testrig/reservation).
	Sales Workload = iota
	// Tabs runs the tab saga (see tab.go): any-order and several sources
	// per instance, recurring deadlines, large payloads, poison and
	// undecodable commands, corrupt records, an operator and a second
	// runner.
	Tabs
)

// String names the workload.
func (w Workload) String() string {
	if w == Tabs {
		return "tabs"
	}
	return "sales"
}

// Config is one run of the simulation. The zero value, with a seed, is the
// full run of the reservation flow.
type Config struct {
	Seed     uint64
	Workload Workload
	// Orders is how many orders are placed (tabs opened, for Tabs); zero
	// means DefaultOrders (DefaultTabs).
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
	switch {
	case c.Orders > 0:
		return c.Orders
	case c.Workload == Tabs:
		return DefaultTabs
	}
	return DefaultOrders
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
	// Tab are the figures of the tab workload.
	Tab TabStats
}

// TabStats are the figures of the tab workload. Tabs are the tabs checked
// and Messages their messages that the sources sent (Lost are those they
// never sent); Handled were handled once, Touched left unhandled by an
// operator's skip or release. Compensated counts the rejected charges
// refunded. TooLarge counts the deliveries refused as too large to hold,
// DeadLetters the events and records parked because their instance was
// damaged (Corruptions times, each Repaired). Retries, Skips, Releases
// and Redrives are the operator's actions that went through, StaleRefused
// those refused because the instance had moved on, RedrivesRefused
// re-drives from a step whose delivery was too large to keep.
// SecondCatchUps are the second runner's catch-ups; Deployed counts the
// seeds whose production moved to the fixed code.
type TabStats struct {
	Tabs, Messages, Lost, Handled, Touched, Compensated    int
	TooLarge, DeadLetters, Corruptions, Repairs            int
	Retries, Skips, Releases, Redrives, StaleRefused       int
	RedrivesRefused, SecondCatchUps, Deployed, SkippedCmds int
}

// add adds u to t.
func (t *TabStats) add(u TabStats) {
	t.Tabs += u.Tabs
	t.Messages += u.Messages
	t.Lost += u.Lost
	t.Handled += u.Handled
	t.Touched += u.Touched
	t.Compensated += u.Compensated
	t.TooLarge += u.TooLarge
	t.DeadLetters += u.DeadLetters
	t.Corruptions += u.Corruptions
	t.Repairs += u.Repairs
	t.Retries += u.Retries
	t.Skips += u.Skips
	t.Releases += u.Releases
	t.Redrives += u.Redrives
	t.StaleRefused += u.StaleRefused
	t.RedrivesRefused += u.RedrivesRefused
	t.SecondCatchUps += u.SecondCatchUps
	t.Deployed += u.Deployed
	t.SkippedCmds += u.SkippedCmds
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

// world is one run of the reservation flow: the store that survives
// everything, the process that crashes, and the sources around them.
type world struct {
	*base
	sale *saga.Type[reservation.Sale]

	proc     *process
	bridge   bridge
	outbox   outbox
	psp      psp
	observed eventstore.Position
	orders   []*order
	byID     map[string]*order
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
	// command is the command last dispatched under the ID.
	command command.Command
}

// Run runs one seed: the workload under faults, then a drain without
// faults, then the checks. The error is a failure of the simulation
// itself; what the code under test got wrong is in Result.Violations.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Workload == Tabs {
		return runTabs(ctx, cfg)
	}
	w := &world{base: newBase(ctx, cfg, sha256.New()), byID: make(map[string]*order)}
	defer func() { _ = w.mem.Close() }()
	w.base.restart = w.restart
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
	return w.result()
}

// result hashes the store the run left and sums up what it found.
func (w *base) result() (*Result, error) {
	if err := w.hashStore(); err != nil {
		return nil, err
	}
	res := &Result{Config: w.cfg, Violations: w.violations, Hash: hex.EncodeToString(w.hash.Sum(nil)), Trace: w.trace,
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
		o.in.Seats = 1 + w.work.IntN(domain.MaxSeats)
		amount := 1 + w.work.Int64N(reservation.MaxAmountCents)
		if amount%7 == 0 {
			amount++
		}
		switch kind := w.work.IntN(100); {
		case kind < 10: // seat shortage
			o.in.Seats = domain.MaxSeats + 1 + w.work.IntN(5)
		case kind < 20: // the payment is refused
			amount = reservation.MaxAmountCents + 1 + w.work.Int64N(1000)
		case kind < 30: // the payment stays pending: the deadline rejects the order
			amount = 7 * (1 + w.work.Int64N(reservation.MaxAmountCents/7))
		case kind < 55: // pending, then settled by the provider around the deadline
			amount = 7 * (1 + w.work.Int64N(reservation.MaxAmountCents/7))
			o.in.Settled = true
		}
		o.in.AmountCents = amount
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
	tiny := retry.Policy{Initial: time.Microsecond, Max: time.Microsecond}
	bus := command.New(w.store, w.reg, command.Options{Logger: w.log, Retry: tiny, Middleware: []command.Middleware{w.track}})
	if err := reservation.Route(bus); err != nil {
		return err
	}
	r, err := saga.NewRunner(w.sale, w.store, bus, saga.RunnerOptions{Clock: w.clock, Workers: 1, Logger: w.log,
		Checkpoints: w.checkpoints, Retry: retry.Policy{Attempts: 3, Initial: tiny.Initial, Max: tiny.Max}})
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

// deliverStored is the bridge's turn, into the runner's HandleStored.
func (w *world) deliverStored() error {
	return w.base.deliverStored(&w.bridge, sink{consumer: eventsConsumer(w.proc.runner), handle: w.proc.runner.HandleStored})
}

// saveBridge moves the bridge's checkpoint.
func (w *world) saveBridge() error {
	return w.base.saveBridge(&w.bridge, eventsConsumer(w.proc.runner))
}

// eventsConsumer and outboxConsumer name the consumers of a runner of one
// segment.
func eventsConsumer[S any](r *saga.Runner[S]) string {
	events, _, _ := r.Consumers(0)
	return events
}

func outboxConsumer[S any](r *saga.Runner[S]) string {
	_, outbox, _ := r.Consumers(0)
	return outbox
}
