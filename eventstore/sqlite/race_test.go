package sqlite

import (
	"testing"

	"github.com/cairn-es/cairn/internal/testrig/race"
)

// outsideRace skips an exhaustive test under the race detector: one that
// checks the answers of many reads or commands from one goroutine, in
// which the detector watches no concurrency of the test's own but slows
// SQLite's transpiled C: the five that call it took 81 s under it (of the
// package's 313 on a quiet machine) and take 6 s without. The store's own
// goroutines are what the rest of the package runs under the detector.
// `make test` (test-main) runs every caller again without the detector,
// by name: a new caller goes into that list too.
func outsideRace(t *testing.T) {
	t.Helper()
	if race.Enabled {
		t.Skip("exhaustive, from one goroutine: make test runs it without the race detector")
	}
}

// OutsideRace is outsideRace for the package's external tests.
var OutsideRace = outsideRace
