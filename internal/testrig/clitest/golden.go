// Package clitest is the rig of the cairn command line's golden tests,
// shared by the tests of package cli (in-process, on SQLite and
// PostgreSQL) and those of the cairn binary (cmd/cairn, a process on the
// KurrentDB test server), so that the three stores are held to one
// expected output: the fixtures every golden case starts from, built
// through any store's own API ([BuildFixture], [BuildConsumers],
// [NewLedger]); the tables of the cases that the bare binary runs
// ([StreamsCases], [ConsumerCases], [ConsumerChanges], [SagasBareCases]);
// and the comparison with the golden files ([Golden]), after the
// normalizations that make runs and stores comparable ([Normalize]).
//
// It is a test rig, not API: see package testrig.
package clitest

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// normalizations make output that differs between runs and stores (times,
// positions, IDs, paths, a schema's random name) comparable. Runs of
// spaces shrink to two, so that a column widened by a longer position on
// one store still compares.
var normalizations = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`), "<TIME>"},
	{regexp.MustCompile(`"\d+:\d+"`), `"<POS>"`},
	{regexp.MustCompile(`\b\d+:\d+\b`), "<POS>"},
	{regexp.MustCompile(`[0-9A-HJKMNP-TV-Z]{26}`), "<ULID>"},
	{regexp.MustCompile(`(sqlite|postgres|(kurrentdb|esdb)(\+discover)?)://\S*`), "<STORE>"},
	{regexp.MustCompile(`\b\d+(\.\d+)?(ns|µs|ms|s|m|h)\b`), "<DURATION>"},
	// doctor names the store and its schema version: a SQL store's is
	// this build's, KurrentDB has none ("-"). Which store it is, and its
	// version, the tests check apart (TestGoldenSagas in cli, the
	// KurrentDB golden test in cmd/cairn); the goldens hold the rest.
	// A rebuild prints its rate, ls a time lag.
	{regexp.MustCompile(`(sqlite|postgres|kurrentdb), schema version (\d+ \(this build's: the store opened at it\)|-)`), "<KIND>, schema version <N>"},
	{regexp.MustCompile(`"store": "(sqlite|postgres|kurrentdb)"`), `"store": "<KIND>"`},
	{regexp.MustCompile(`"schema_version": \d+`), `"schema_version": <N>`},
	{regexp.MustCompile(`\d+ events/s`), "<RATE> events/s"},
	{regexp.MustCompile(`"rate": [0-9.e+-]+`), `"rate": <RATE>`},
	{regexp.MustCompile(`"time_lag_seconds": [0-9.e+-]+`), `"time_lag_seconds": <SECONDS>`},
	{regexp.MustCompile(` {2,}`), "  "},
	{regexp.MustCompile(` +\n`), "\n"},
}

// Normalize applies the normalizations to s.
func Normalize(s string) string {
	for _, n := range normalizations {
		s = n.re.ReplaceAllString(s, n.with)
	}
	return s
}

// Output is what a golden file holds of one run of the command line: its
// stdout, its stderr and its exit code, each under a mark.
func Output(stdout, stderr string, code int) string {
	return stdout + "--- stderr\n" + stderr + "--- exit " + strconv.Itoa(code) + "\n"
}

// Golden compares got, normalized, with dir/<name>.golden, or, with
// update, writes it there.
func Golden(t testing.TB, dir, name, got string, update bool) {
	t.Helper()
	path := filepath.Join(dir, name+".golden")
	got = Normalize(got)
	if update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "no golden file %s: run go test ./cli/ -run %s -update", path, t.Name())
	require.Equal(t, string(want), got, "output of %s differs from %s (go test ./cli/ -update rewrites it)", t.Name(), path)
}
