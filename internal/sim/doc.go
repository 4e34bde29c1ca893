// Package sim is the deterministic simulation of Cairn's saga runner: the
// reservation flow (internal/reservation) run by one goroutine from a
// seed, under faults, and checked afterwards.
//
// Everything between the store and the runner is the simulation's: a
// delivery bridge reads the store's log and hands events to
// Runner.HandleStored at least once, each stream's in order the first
// time, and otherwise drops, duplicates, delays and reorders them; a
// payment provider delivers its messages through Runner.Deliver out of
// order and more than once; an outbox dispatcher hands the saga's step
// records to Runner.SendStored; a scheduler calls Runner.FireDue. The
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
// TestSimulation runs 500 seeds in `make test` and 10,000 in `make sim`;
// `make sim SEED=n` replays one seed with its trace.
package sim
