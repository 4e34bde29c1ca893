//go:build !race

// Package race tells tests whether the race detector is on: it changes
// what they may assert about allocations (sync.Pool drops what it holds at
// random under it) and timings.
package race

// Enabled says the race detector is on.
const Enabled = false
