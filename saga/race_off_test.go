//go:build !race

package saga_test

// raceEnabled says the tests run under the race detector (see
// race_on_test.go).
const raceEnabled = false
