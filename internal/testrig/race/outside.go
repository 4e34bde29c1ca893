package race

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// OutsideList is the file, in a package's directory, that names one a
// line the package's tests that call [Outside]: `make test` runs exactly
// those without the race detector, its -run pattern read from the file.
const OutsideList = "testdata/outside-race.txt"

// Outside skips an exhaustive test under the race detector: one that
// checks the answers of many reads, loads or commands from one goroutine,
// in which the detector watches no concurrency of the test's own but
// slows everything it runs ten times or more (SQLite's transpiled C most
// of all). What runs concurrently stays under the detector in other
// tests. Outside fails a test that [OutsideList] does not name, in both
// modes, so that no test is skipped under the detector without running
// elsewhere.
func Outside(t *testing.T) {
	t.Helper()
	list, err := os.ReadFile(OutsideList)
	if err != nil {
		t.Fatalf("race.Outside: %v", err)
	}
	if !slices.Contains(strings.Fields(string(list)), t.Name()) {
		t.Fatalf("race.Outside: %s is not in %s, which make test runs without the race detector", t.Name(), OutsideList)
	}
	if Enabled {
		t.Skip("exhaustive, from one goroutine: make test runs it without the race detector (" + OutsideList + ")")
	}
}
