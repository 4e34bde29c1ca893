//go:build race

package projectiontest

// raceEnabled scales the crash test down: under the race detector SQLite
// (transpiled C) runs some forty times slower.
const raceEnabled = true
