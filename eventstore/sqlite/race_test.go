package sqlite

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-es/cairn/internal/testrig/race"
)

// outsideRaceList names, one a line, the tests that call outsideRace:
// `make test` (test-main) runs exactly these without the race detector,
// its -run pattern read from this file, and outsideRace fails a test it
// does not name, so that no caller is skipped under the detector without
// running elsewhere.
const outsideRaceList = "testdata/outside-race.txt"

// outsideRace skips an exhaustive test under the race detector: one that
// checks the answers of many reads or commands from one goroutine, in
// which the detector watches no concurrency of the test's own but slows
// SQLite's transpiled C: the five that call it took 81 s under it (of the
// package's 313 on a quiet machine) and take 6 s without. The store's own
// goroutines are what the rest of the package runs under the detector.
func outsideRace(t *testing.T) {
	t.Helper()
	list, err := os.ReadFile(outsideRaceList)
	if err != nil {
		t.Fatalf("outsideRace: %v", err)
	}
	if !slices.Contains(strings.Fields(string(list)), t.Name()) {
		t.Fatalf("outsideRace: %s is not in %s, which make test runs without the race detector", t.Name(), outsideRaceList)
	}
	if race.Enabled {
		t.Skip("exhaustive, from one goroutine: make test runs it without the race detector (" + outsideRaceList + ")")
	}
}

// OutsideRace is outsideRace for the package's external tests.
var OutsideRace = outsideRace
