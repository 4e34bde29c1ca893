// Package sim is the deterministic simulation of Cairn's saga runner: the
// reservation flow (internal/testrig/reservation) run by one goroutine from a
// seed, under faults, and checked afterwards.
//
// Everything between the store and the runner is the simulation's: a
// delivery bridge reads the store's log and hands events to
// Runner.HandleStored at least once, each stream's in order the first
// time, and otherwise drops, duplicates, delays and reorders them; a
// payment provider delivers its messages through Runner.Deliver out of
// order and more than once; an outbox dispatcher hands the saga's step
// records to sagaharness.SendStored; a scheduler calls Runner.FireDue. The
// store under them (the memory store, which outlives every crash) fails
// appends and checkpoint saves before or after the write, and the process
// (bus, runner, bridge and outbox with their caches and cursors) crashes
// and restarts at random points. A sagatest.Clock, moved in seeded jumps,
// decides which payment deadlines fire.
//
// After the faults stop and the system drains, the checks run: every
// order ends as its inputs dictate (reservation.Checker), every instance
// handled each source's messages in order and each once, every deadline
// fired at most once, never early and never after its cancellation, every
// command took effect exactly once, and every instance completed. A run
// that fails is shrunk (see [Shrink]); the same seed always runs the same
// way, which [Result.Hash] shows.
//
// A second workload (Config.Workload Tabs, tab*.go) walks the paths the
// reservation flow never takes: a saga with any-order mappings and three
// sources per instance, an inactivity timeout re-armed by each message, a
// reminder that re-arms itself, cancel-after-schedule in one step, a
// completing step whose charge is rejected, payloads near and over the
// limits, poison and undecodable commands, damaged records repaired by
// an operator, an operator's process (Retry, Skip, Release, Redrive on a
// fixed code version, on fresh and stale views, racing the others) and a
// second runner without leases on the same checkpoints. Its handlers
// write the promises they see broken into the state; the checker counts
// every message and command against the plan.
//
// TestSimulation runs 500 seeds in `make test` and 10,000 in `make sim`;
// `make sim SEED=n` replays one seed with its trace; WORKLOAD=tabs runs
// the tab workload.
package sim
