package sim

import (
	"context"
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
	"github.com/cairn-es/cairn/saga/sagatest"
)

// base is what every workload's run has: the seed's random sources, the
// clock, the store that survives every crash, the record of what the bus
// did with each command, and the trace. Each workload adds its process and
// the sources around it.
type base struct {
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
	log         *slog.Logger
	// restart throws the workload's process away and starts it again.
	restart func() error

	logEnd eventstore.Position
	cmds   map[string]*sentCommand
	stats  Stats

	hash       hash.Hash
	trace      []string
	violations []string
}

// newBase sets up a run of cfg: the random sources (the workload's and
// the injector's, apart, so that suppressing faults leaves the workload's
// draws alone), the clock and the stores.
func newBase(ctx context.Context, cfg Config, h hash.Hash) *base {
	b := &base{cfg: cfg, ctx: ctx, hash: h, cmds: make(map[string]*sentCommand),
		work: rand.New(rand.NewPCG(cfg.Seed, 0x5a6a)), log: slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError + 1}))}
	b.inj = &injector{rng: rand.New(rand.NewPCG(cfg.Seed, 0xfa17)), on: true, disabled: cfg.Disabled, trace: b.tracef}
	if cfg.LimitFaults {
		b.inj.allowed = make(map[int]bool, len(cfg.Allowed))
		for _, n := range cfg.Allowed {
			b.inj.allowed[n] = true
		}
	}
	b.start = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	b.clock = sagatest.NewClock(b.start)
	b.mem = memory.New()
	b.store = &faultStore{Store: b.mem, inj: b.inj}
	b.checkpoints = &faultCheckpoints{Store: memory.New(), inj: b.inj}
	b.reg = codec.NewRegistry(codec.Options{})
	return b
}

// crash kills the process at this point and starts a new one.
func (b *base) crash(why string) error {
	b.stats.Crashes++
	b.tracef("crash (%s): the process restarts", why)
	return b.restart()
}

// track is the bus middleware that tells the simulation what became of
// each command.
func (b *base) track(next command.Handler) command.Handler {
	return command.HandlerFunc(func(ctx context.Context, msg *command.Message) (command.Result, error) {
		res, err := next.Dispatch(ctx, msg)
		c := b.cmds[msg.ID]
		if c == nil {
			c = &sentCommand{}
			b.cmds[msg.ID] = c
		}
		c.attempts++
		c.command = msg.Command
		if err == nil || res.Rejected {
			c.acknowledged = true
			c.rejected = c.rejected || res.Rejected
		}
		if err == nil && res.Duplicate {
			c.absorbed = true
			b.stats.DuplicatesAbsorbed++
		}
		return res, err
	})
}

// failed looks at an operation's error: one the simulation injected may
// be followed by a crash of the process right there (the kind given);
// any other is a finding.
func (b *base) failed(op string, err error, crash Kind) (crashed bool, _ error) {
	b.tracef("%s: error: %v", op, err)
	if !errors.Is(err, ErrInjected) {
		b.violate("%s failed on its own: %v", op, err)
	}
	if f, _ := b.inj.fault(crash); f {
		return true, b.crash(crash.String() + " after " + op)
	}
	return false, nil
}

// violate records a failed check, once per text.
func (b *base) violate(format string, args ...any) {
	v := fmt.Sprintf(format, args...)
	for _, seen := range b.violations {
		if seen == v {
			return
		}
	}
	if len(b.violations) < 50 {
		b.violations = append(b.violations, v)
	}
}

// tracef adds a line to the trace: to the hash always, to the kept trace
// when asked. Lines carry the tick and the simulated time, never a wall
// clock reading or a random ID.
func (b *base) tracef(format string, args ...any) {
	line := fmt.Sprintf("t%d +%s ", b.tick, b.clock.Now().Sub(b.start)) + fmt.Sprintf(format, args...)
	b.hash.Write([]byte(line))
	b.hash.Write([]byte{'\n'})
	if b.cfg.Trace {
		b.trace = append(b.trace, line)
	}
}

// hashStore adds what the store holds at the end to the hash: every
// event's stream, version and type, in log order.
func (b *base) hashStore() error {
	for ev, err := range b.mem.ReadAll(b.ctx, eventstore.Start, eventstore.Filter{}) {
		if err != nil {
			return err
		}
		fmt.Fprintf(b.hash, "%s#%d %s\n", ev.StreamID, ev.Version, ev.Type)
	}
	return nil
}

// op moves the clock for one operation.
func (b *base) op() { b.clock.Advance(opTime) }

// jump is how far the clock moves at the start of a tick: mostly seconds,
// sometimes minutes, now and then most of a payment window, so that some
// payments miss their deadline.
func (b *base) jump() time.Duration {
	switch p := b.work.IntN(100); {
	case p < 70:
		return time.Duration(5+b.work.IntN(35)) * time.Second
	case p < 95:
		return time.Duration(60+b.work.IntN(180)) * time.Second
	default:
		return time.Duration(6+b.work.IntN(12)) * time.Minute
	}
}

// saveCheckpoint moves a consumer's checkpoint to pos, from where the
// store has it; a failed save is tried again at the next one.
func (b *base) saveCheckpoint(name string, pos eventstore.Position) error {
	cp, err := b.checkpoints.Checkpoint(b.ctx, name)
	if err != nil {
		return err
	}
	if cp.Position == pos {
		return nil
	}
	if err := b.checkpoints.SaveCheckpoint(b.ctx, name, cp.Position, pos, 0); err != nil {
		b.tracef("checkpoint %s: error: %v", name, err)
		if !errors.Is(err, ErrInjected) {
			b.violate("checkpoint %s failed on its own: %v", name, err)
		}
	}
	return nil
}

// logLength returns the position of the last event stored.
func (b *base) logLength() eventstore.Position {
	if head, err := b.mem.Head(b.ctx); err == nil {
		b.logEnd = head
	}
	return b.logEnd
}
