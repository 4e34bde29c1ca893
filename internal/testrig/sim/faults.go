package sim

import (
	"errors"
	"math/rand/v2"
	"strings"
)

// ErrInjected is matched (errors.Is) by every failure the simulation
// injects; any other error from the code under test is a finding.
var ErrInjected = errors.New("sim: injected fault")

// Kind is a kind of fault.
type Kind int

// The faults the simulation injects. Each has a probability per chance the
// simulation gives it (see [injector.fault]).
const (
	// Drop loses a delivery in transit: the broker redelivers it after its
	// visibility timeout, a few ticks later.
	Drop Kind = iota
	// Duplicate delivers a message again later, after it was acknowledged.
	Duplicate
	// Delay holds a delivery back a tick or more.
	Delay
	// Reorder delivers a message that is not the oldest waiting.
	Reorder
	// AppendBefore fails an append before it writes anything.
	AppendBefore
	// AppendAfter fails an append after it wrote: a crash between the
	// write and its acknowledgement.
	AppendAfter
	// CheckpointBefore and CheckpointAfter do the same to checkpoint saves.
	CheckpointBefore
	CheckpointAfter
	// Stall makes the outbox dispatcher or the deadline scheduler skip a
	// tick.
	Stall
	// CrashStep, CrashSend and CrashFire kill the process right after a
	// failed step (a stored or delivered event), a failed send of the
	// outbox, or a failed firing of deadlines: a crash at that point.
	CrashStep
	CrashSend
	CrashFire
	// CrashIdle kills the process between two operations.
	CrashIdle
	// RestartOutbox restarts the outbox dispatcher alone: it resumes after
	// its stored checkpoint.
	RestartOutbox
	// RestartBridge restarts the delivery bridge alone: what it had in
	// flight is lost, and it resumes after its stored checkpoint.
	RestartBridge

	// The faults of the tab workload (see tabworld.go).

	// Corrupt puts a record that cannot be read at the head of one
	// instance's stream: a foreign event, or a damaged step record. The
	// operator repairs it a few ticks later.
	Corrupt
	// Race runs another process's step on an instance (a delivery, a
	// firing, a colleague's operator action) right after the operator's
	// process has read that instance, before it acts.
	Race
	// Stale makes the operator act on what it saw of an instance some
	// ticks before, rather than on a fresh look.
	Stale
	// SecondRunner gives the second runner (another process on the same
	// store and checkpoints, without leases) a catch-up this tick.
	SecondRunner
	// CrashSecond restarts the second runner.
	CrashSecond

	numKinds
)

var kindNames = [numKinds]string{"drop", "duplicate", "delay", "reorder", "append-before", "append-after",
	"checkpoint-before", "checkpoint-after", "stall", "crash-step", "crash-send", "crash-fire", "crash-idle",
	"restart-outbox", "restart-bridge", "corrupt", "race", "stale", "second-runner", "crash-second"}

// probability is each kind's chance per opportunity. The crashes after a
// failure are likely, so that a crash lands on most failed writes' heels;
// the others are rare enough that a run still makes progress.
var probability = [numKinds]float64{
	Drop: 0.04, Duplicate: 0.06, Delay: 0.05, Reorder: 0.15,
	AppendBefore: 0.015, AppendAfter: 0.015, CheckpointBefore: 0.05, CheckpointAfter: 0.05,
	Stall: 0.1, CrashStep: 0.3, CrashSend: 0.3, CrashFire: 0.3, CrashIdle: 0.01,
	RestartOutbox: 0.02, RestartBridge: 0.02,
	Corrupt: 0.015, Race: 0.25, Stale: 0.2, SecondRunner: 0.15, CrashSecond: 0.005,
}

// String returns the kind's name.
func (k Kind) String() string {
	if k >= 0 && k < numKinds {
		return kindNames[k]
	}
	return "unknown"
}

// Kinds is a set of fault kinds.
type Kinds uint32

// Has reports whether k is in the set.
func (s Kinds) Has(k Kind) bool { return s&(1<<k) != 0 }

// With returns the set with k added.
func (s Kinds) With(k Kind) Kinds { return s | 1<<k }

// String lists the set's kinds.
func (s Kinds) String() string {
	var names []string
	for k := range numKinds {
		if s.Has(k) {
			names = append(names, k.String())
		}
	}
	return strings.Join(names, ",")
}

// injector decides the faults of one run. Every chance it is asked about
// is an opportunity, numbered in order; each draws the same random numbers
// whether it faults or not, so that suppressing some faults (when
// shrinking) leaves the draws of the others where they were.
type injector struct {
	rng      *rand.Rand
	on       bool
	disabled Kinds
	// allowed, when set, are the only opportunities that may fault.
	allowed map[int]bool
	n       int
	faulted []int
	counts  [numKinds]int
	trace   func(format string, args ...any)
}

// fault reports whether opportunity k faults now, and returns a random
// number for the fault's details (which message, how long), drawn either
// way.
func (in *injector) fault(k Kind) (bool, uint64) {
	n := in.n
	in.n++
	p, aux := in.rng.Float64(), in.rng.Uint64()
	if !in.on || in.disabled.Has(k) || p >= probability[k] || (in.allowed != nil && !in.allowed[n]) {
		return false, aux
	}
	in.faulted = append(in.faulted, n)
	in.counts[k]++
	in.trace("fault #%d %s", n, k)
	return true, aux
}
