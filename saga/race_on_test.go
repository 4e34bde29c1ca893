//go:build race

package saga_test

// raceEnabled says the tests run under the race detector, where a step
// costs some ten times more: the memory test runs a smaller size there.
const raceEnabled = true
