//go:build race

package race

// Enabled says the race detector is on.
const Enabled = true
