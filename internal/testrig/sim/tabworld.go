package sim

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/sagaharness"
	"github.com/cairn-es/cairn/retry"
	"github.com/cairn-es/cairn/saga"
)

// DefaultTabs is how many tabs a seed of the tab workload opens.
const DefaultTabs = 30

// The tab workload (Config.Workload Tabs) runs the tab saga (tab.go)
// under the faults of the reservation flow and more: the production
// process (runner A, fed by the bridge, the outbox dispatcher and the
// scheduler, as in the reservation flow) shares the store and the
// checkpoints with a second runner (B, driven by its own consumers through
// CatchUp, without leases), and with an operator's process (runner O, on
// the fixed code, no cache) that retries, skips, releases and re-drives
// while the others run. Records are damaged under the instances, and
// repaired; production may deploy the fixed code halfway.

// tab is one tab of the workload and what happened to it.
type tab struct {
	index int
	id    string
	// openAt is the tick its stream is opened at; close the account of its
	// closing charge.
	openAt int
	close  string
	items  []*feedItem
	scans  []*scan
	// touched are the messages (by name) an operator skipped, or released
	// the gap of: handled once or not at all. The checker reads them from
	// the instance's history (see operatorSteps).
	touched map[string]bool
	// corrupt is the version of the record put under the instance until
	// the operator repairs it, at tick repairAt; damaged keeps it, and
	// corrupted says it happened.
	corrupt, damaged uint64
	repairAt         int
	corrupted        bool
}

// feedItem is an event of a tab's stream: k 0 opens it.
type feedItem struct {
	k      uint64
	at     int
	ev     any
	stored bool
}

// scan is a message of an outside source for a tab.
type scan struct {
	tab    *tab
	source string
	seq    uint64
	ev     any
	// at is the tick the source sends it; lost says it never does.
	at   int
	lost bool
	id   uuid.UUID
	due  int
	sent bool
}

// tabProc is one runner's process: its code, bus and runner.
type tabProc struct {
	name   string
	code   *tabCode
	bus    *command.Bus
	runner *saga.Runner[Tab]
}

// tabWorld is one run of the tab workload.
type tabWorld struct {
	*base
	choose *rand.Rand // the operator's choices

	tabs []*tab
	byID map[string]*tab
	// deployAt is the tick production moves to version 2 (never when
	// negative); version is production's code now.
	deployAt, version int

	a, b, o, colleague *tabProc
	bridge             bridge
	outbox             outbox
	pool               []*scan
	// seen are the operator's last looks at the instances.
	seen map[string]saga.Explanation[Tab]
	// skipped are the commands an operator skipped, read from the
	// histories by the checker.
	skipped map[string]bool
	// aloneB says the second runner drains alone: the production process
	// stops when the faults do.
	aloneB bool
	racing bool
	// quiet says the drain found nothing moving: the operator looks at
	// every instance then.
	quiet bool
}

func runTabs(ctx context.Context, cfg Config) (*Result, error) {
	w := &tabWorld{base: newBase(ctx, cfg, sha256.New()), byID: map[string]*tab{}, seen: map[string]saga.Explanation[Tab]{},
		skipped: map[string]bool{}, version: 1, choose: rand.New(rand.NewPCG(cfg.Seed, 0x09e7))}
	defer func() { _ = w.mem.Close() }()
	w.base.restart = w.restart
	w.store.advance = w.op
	if err := registerTabs(w.reg, 1); err != nil {
		return nil, err
	}
	w.plan()
	if err := w.restart(); err != nil {
		return nil, err
	}
	if err := w.restartSecond(); err != nil {
		return nil, err
	}
	var err error
	if w.o, err = w.process("operator", 2, true, &raceStore{Store: w.store, w: w}, saga.RunnerOptions{NoCache: true}); err != nil {
		return nil, err
	}
	if w.colleague, err = w.process("colleague", 2, true, w.store, saga.RunnerOptions{NoCache: true}); err != nil {
		return nil, err
	}
	if err := w.run(); err != nil {
		return nil, err
	}
	if err := w.check(); err != nil {
		return nil, err
	}
	return w.result()
}

// plan draws the tabs. Every tab's draws are the same whichever tabs a run
// opens.
func (w *tabWorld) plan() {
	only := map[int]bool{}
	for _, i := range w.cfg.Only {
		only[i] = true
	}
	w.deployAt = -1
	if w.work.IntN(2) == 0 {
		w.deployAt = 10 + w.work.IntN(40)
	}
	w.aloneB = w.work.IntN(2) == 0
	// A third of the seeds have a heavy tab, whose outside messages are
	// large (270 KiB) three times in ten, so that it holds three at once, which
	// no record can keep; elsewhere one in 200 is. Every record of an
	// instance copies the deliveries it holds, and every restart reads
	// every record again: spread over all the tabs, as many large messages
	// made a seed twice as slow and held three at once less often.
	heavy := -1
	if w.work.IntN(3) == 0 {
		heavy = w.work.IntN(w.cfg.orders())
	}
	at := 0
	for i := range w.cfg.orders() {
		t := &tab{index: i, id: fmt.Sprintf("t%03d", i), touched: map[string]bool{}}
		at += w.work.IntN(2)
		t.openAt = at
		t.close = "a-" + t.id
		if w.work.IntN(3) == 0 {
			t.close = "reject-" + t.id
		}
		t.items = append(t.items, &feedItem{k: 0, at: at, ev: TabOpened{Tab: t.id, Close: t.close}})
		clock := at
		for k := uint64(1); k <= uint64(1+w.work.IntN(4)); k++ {
			clock += 1 + w.work.IntN(6)
			item := TabItem{Tab: t.id, K: k, Account: w.account(t, 10, 7), Legacy: w.work.IntN(5) == 0, Flaw: w.flaw()}
			switch p := w.work.IntN(200); {
			case p < 2: // near the store's limit on an event
				item.Pad = strings.Repeat("n", storekit.MaxEventSize-4<<10)
			case p < 5: // over a step record's budget
				item.Pad = strings.Repeat("o", 800<<10)
			}
			t.items = append(t.items, &feedItem{k: k, at: clock, ev: item})
		}
		for _, source := range []string{"scan-a", "scan-b"} {
			n := 2 + w.work.IntN(5)
			for seq := range uint64(n) {
				s := &scan{tab: t, source: source, seq: seq, at: at + w.work.IntN(20),
					id: uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "%d/%s/%s/%d", w.cfg.Seed, t.id, source, seq))}
				pad := ""
				switch p := w.work.IntN(200); {
				case p < 1 || i == heavy && p < 60: // three of them held make a record over the budget
					pad = strings.Repeat("h", 270<<10)
				case p < 2: // over the store's limit on an event
					pad = strings.Repeat("H", storekit.MaxEventSize+8<<10)
				}
				if w.work.IntN(100) < 40 {
					if len(pad) > 600<<10 {
						pad = pad[:100<<10] // a tick over the budget could never be held
					}
					s.ev = TabTick{Tab: t.id, Source: source, Seq: seq, Account: w.account(t, 60, 3), Flaw: w.flaw(), Pad: pad}
					s.lost = seq+1 < uint64(n) && w.work.IntN(100) < 6
				} else {
					s.ev = TabPing{Tab: t.id, Source: source, Seq: seq, Pad: pad}
				}
				t.scans = append(t.scans, s)
			}
		}
		if len(only) == 0 || only[i] {
			w.tabs = append(w.tabs, t)
			w.byID[t.id] = t
		}
	}
}

// account draws where a charge goes: mostly the tab's own account, some
// rejecting, some panicking (out of 100: none, and reject and panic).
func (w *tabWorld) account(t *tab, none, reject int) string {
	switch p := w.work.IntN(100); {
	case p < none:
		return ""
	case p < none+reject:
		return "reject-" + t.id
	case p < none+reject+3:
		return "panic-" + t.id
	}
	return "a-" + t.id
}

// flaw draws a message's flaw, rarely.
func (w *tabWorld) flaw() string {
	switch p := w.work.IntN(100); {
	case p < 3:
		return flawFail
	case p < 5:
		return flawBloat
	case p < 7:
		return flawZero
	}
	return ""
}

// process makes a runner of version v of the tab code on store.
func (w *tabWorld) process(name string, v int, all bool, store eventstore.Store, opts saga.RunnerOptions) (*tabProc, error) {
	code, err := newTabCode(v, all)
	if err != nil {
		return nil, err
	}
	tiny := retry.Policy{Initial: time.Microsecond, Max: time.Microsecond}
	bus, err := code.bus(store, command.Options{Logger: w.log, Retry: tiny, Middleware: []command.Middleware{w.track}})
	if err != nil {
		return nil, err
	}
	opts.Clock, opts.Logger, opts.Checkpoints, opts.Retry = w.clock, w.log, w.checkpoints, tiny
	opts.Retry.Attempts = 3
	if opts.Workers == 0 {
		opts.Workers = 1
	}
	r, err := saga.NewRunner(code.typ, store, bus, opts)
	if err != nil {
		return nil, err
	}
	return &tabProc{name: name, code: code, bus: bus, runner: r}, nil
}

// restart starts the production process (again), on the code production
// runs now; the bridge and the outbox dispatcher resume after their
// checkpoints.
func (w *tabWorld) restart() error {
	p, err := w.process("A", w.version, false, w.store, saga.RunnerOptions{})
	if err != nil {
		return err
	}
	if err := p.runner.LoadDeadlines(w.ctx); err != nil {
		return err
	}
	w.a = p
	w.bridge.reset()
	w.outbox.reset()
	return nil
}

// restartSecond starts the second runner (again). It reads the store
// through snapshots and never fails an append: its consumers retry a
// failed batch after a wall-clock pause, which a simulation cannot spend;
// its checkpoint saves fail as everyone's do.
func (w *tabWorld) restartSecond() error {
	p, err := w.process("B", w.version, false, &snapshotStore{Store: w.mem, advance: w.op}, saga.RunnerOptions{CacheSize: 2, BatchSize: 1})
	w.b = p
	return err
}

// run runs the workload under faults, then stops the faults and drains.
func (w *tabWorld) run() error {
	last := 0
	for _, t := range w.tabs {
		for _, s := range t.scans {
			last = max(last, s.at)
		}
		last = max(last, t.items[len(t.items)-1].at)
	}
	for w.tick = 0; w.tick <= last+faultTicks; w.tick++ {
		if err := w.step(w.jump()); err != nil {
			return err
		}
	}
	return w.drain()
}

// step is one tick of the tab workload.
func (w *tabWorld) step(d time.Duration) error {
	w.clock.Advance(d)
	if w.tick == w.deployAt {
		w.version = 2
		w.stats.Tab.Deployed++
		if err := w.crash("production deploys version 2"); err != nil {
			return err
		}
		if err := w.restartSecond(); err != nil {
			return err
		}
	}
	production := !(w.draining && w.aloneB)
	if production {
		if f, _ := w.inj.fault(CrashIdle); f {
			if err := w.crash("idle"); err != nil {
				return err
			}
		}
		if f, _ := w.inj.fault(RestartOutbox); f {
			w.tracef("outbox restarts")
			w.outbox.reset()
		}
		if f, _ := w.inj.fault(RestartBridge); f {
			w.tracef("bridge restarts")
			w.bridge.reset()
		}
	}
	if f, _ := w.inj.fault(CrashSecond); f {
		w.tracef("the second runner restarts")
		if err := w.restartSecond(); err != nil {
			return err
		}
	}
	work := []func() error{w.produce, w.corrupt, w.deliverExternal}
	if production {
		work = append(work, w.deliverStored, w.send, w.fire, w.saveBridge)
	}
	work = append(work, w.second, w.operate)
	for _, fn := range work {
		if err := fn(); err != nil {
			return err
		}
	}
	return nil
}

// produce appends the tabs' stored events due by now; one that fails is
// appended again next tick, with the same event ID.
func (w *tabWorld) produce() error {
	for _, t := range w.tabs {
		for _, it := range t.items {
			if it.stored || it.at > w.tick {
				continue
			}
			if it.k > 0 && !t.items[it.k-1].stored {
				break
			}
			data, err := w.reg.Encode(it.ev)
			if err != nil {
				return err
			}
			data.ID = uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "%d/%s/feed/%d", w.cfg.Seed, t.id, it.k))
			w.op()
			if _, err := w.store.Append(w.ctx, feedStream(t.id), eventstore.Any, data); err != nil {
				if !errors.Is(err, ErrInjected) {
					w.violate("append to %s failed on its own: %v", feedStream(t.id), err)
				}
				break
			}
			it.stored = true
			w.tracef("stored %s#%d", feedStream(t.id), it.k)
		}
	}
	return nil
}

// deliverStored is the bridge's turn, into the production runner.
func (w *tabWorld) deliverStored() error {
	r := w.a.runner
	return w.base.deliverStored(&w.bridge, sink{consumer: eventsConsumer(r), handle: r.HandleStored, park: w.parkEvent})
}

// saveBridge moves the bridge's checkpoint.
func (w *tabWorld) saveBridge() error {
	return w.base.saveBridge(&w.bridge, eventsConsumer(w.a.runner))
}

// send is the production outbox's turn.
func (w *tabWorld) send() error {
	r := w.a.runner
	return w.sendRecords(&w.outbox, w.a.code.typ.Category(), outboxConsumer(r), sagaharness.SendStored(r), w.parkRecord)
}

// fire is the production scheduler's turn.
func (w *tabWorld) fire() error { return w.fireDue(w.a.runner.FireDue) }

// instanceProblem is the runner's rule for an error that concerns one
// instance only (a record that cannot be read, a step the store refuses):
// its consumers keep such an event as a dead letter and go on, and so do
// the bridge and the outbox dispatcher.
func instanceProblem(err error) bool {
	return !errors.Is(err, ErrInjected) && (errors.Is(err, eventstore.ErrCorrupt) || errors.Is(err, eventstore.ErrInvalidArgument) ||
		errors.Is(err, saga.ErrRecordTooLarge))
}

func (w *tabWorld) parkEvent(ev eventstore.Event, err error) (bool, error) {
	return w.park(eventsConsumer(w.a.runner), ev, err)
}

func (w *tabWorld) parkRecord(ev eventstore.Event, err error) (bool, error) {
	return w.park(outboxConsumer(w.a.runner), ev, err)
}

// park keeps ev as a dead letter of consumer when err concerns its
// instance only. It is evidence of a damaged instance, which only the
// simulation's corruption makes: anything else is a finding.
func (w *tabWorld) park(consumer string, ev eventstore.Event, err error) (bool, error) {
	if !instanceProblem(err) {
		return false, nil
	}
	w.stats.Tab.DeadLetters++
	// The damaged record itself stays in the log after the repair: an
	// outbox that reads it again (from a checkpoint before it) parks it
	// again.
	t := w.tabOf(ev)
	damaged := t != nil && (t.corrupt > 0 || t.corrupted && ev.StreamID == saga.StreamPrefix+"tab-"+t.id && ev.Version == t.damaged)
	if !damaged {
		w.violate("%s#%d became a dead letter of %s, though its instance is sound: %v", ev.StreamID, ev.Version, consumer, err)
	}
	now := w.clock.Now()
	_, perr := w.checkpoints.ParkDeadLetter(w.ctx, eventstore.DeadLetter{Consumer: consumer, Event: ev, Error: err.Error(),
		Attempts: 1, FirstFailure: now, LastFailure: now})
	return true, perr
}

// tabOf returns the tab an event of its stream or of its instance's is
// for.
func (w *tabWorld) tabOf(ev eventstore.Event) *tab {
	id, ok := strings.CutPrefix(ev.StreamID, "feed-")
	if !ok {
		id, _ = strings.CutPrefix(ev.StreamID, saga.StreamPrefix+"tab-")
	}
	return w.byID[id]
}

// second is the second runner's turn, now and then: a catch-up of its
// consumers (events, records, due deadlines), as a process running the
// same saga without leases does. In the drain it runs every tick.
func (w *tabWorld) second() error {
	run, _ := w.inj.fault(SecondRunner)
	if !run && !w.draining {
		return nil
	}
	w.op()
	w.stats.Tab.SecondCatchUps++
	if err := w.b.runner.CatchUp(w.ctx); err != nil {
		w.tracef("the second runner's catch-up: error: %v", err)
		if !errors.Is(err, ErrInjected) {
			w.violate("the second runner's catch-up failed on its own: %v", err)
		}
		// The process goes on after a failed catch-up (its next one starts
		// where the checkpoints are), or crashes there. A restart reads
		// every step record in the log again (LoadDeadlines), the dearest
		// thing a seed does: most catch-ups fail on an injected checkpoint
		// fault, and restarting at each one made a seed twice as slow.
		if f, _ := w.inj.fault(CrashStep); f {
			w.tracef("the second runner restarts after its failed catch-up")
			return w.restartSecond()
		}
	}
	w.tracef("the second runner caught up")
	return nil
}
