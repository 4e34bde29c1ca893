package main_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/kurrentdb"
	"github.com/cairn-es/cairn/internal/testrig/clitest"
)

// The golden cases of the bare binary (clitest's tables) run here on the
// KurrentDB test server, through the cairn binary, against the golden
// files that package cli's tests hold SQLite and PostgreSQL to: one
// expected output for the three stores. The goldens are cli's: go test
// ./cli/ -update rewrites them, and this test only reads them.

// goldenDir is where package cli keeps the golden files.
const goldenDir = "../../cli/testdata"

// kurrentGolden compares one run with its golden file: <name>.kurrentdb.golden
// where a case's output cannot be the other stores' (none so far: each
// such file says why in the case that uses it), else <name>.golden.
func kurrentGolden(t *testing.T, name string, r result) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(goldenDir, name+".kurrentdb.golden")); err == nil {
		name += ".kurrentdb"
	}
	clitest.Golden(t, goldenDir, name, clitest.Output(r.stdout, r.stderr, r.code), false)
}

// openKurrentDBStore opens the store on the server at url in the test
// process, to build a fixture through or to check what a command did;
// it is closed when t ends. Each check opens its own, since a store
// caches the state streams it read.
func openKurrentDBStore(t *testing.T, url string) *kurrentdb.Store {
	t.Helper()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := kurrentdb.Open(context.Background(), url, kurrentdb.Options{Logger: log})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// runCase runs one case on the store at url through the binary.
func runCase(t *testing.T, url string, tc clitest.Case, stored []eventstore.Event) result {
	t.Helper()
	return cairn(t, append([]string{"--store", url}, clitest.Substitute(tc.Args, stored)...)...)
}

func TestGoldenStreamsOnKurrentDB(t *testing.T) {
	url := kurrentDB(t)
	stored := clitest.BuildFixture(t, openKurrentDBStore(t, url))
	for _, tc := range clitest.StreamsCases {
		t.Run(tc.Name, func(t *testing.T) {
			kurrentGolden(t, tc.Name, runCase(t, url, tc, stored))
		})
	}
}

func TestGoldenConsumersOnKurrentDB(t *testing.T) {
	url := kurrentDB(t)
	s := openKurrentDBStore(t, url)
	stored := clitest.BuildFixture(t, s)
	clitest.BuildConsumers(t, s, stored)
	for _, tc := range clitest.ConsumerCases {
		t.Run(tc.Name, func(t *testing.T) {
			kurrentGolden(t, tc.Name, runCase(t, url, tc, stored))
		})
	}
	clitest.CheckUnchanged(t, openKurrentDBStore(t, url), stored)

	// The goldens hide which store doctor names, and its schema version:
	// KurrentDB has none of Cairn's to migrate.
	r := cairn(t, "--store", url, "doctor", "--json")
	var report struct {
		Store         string `json:"store"`
		SchemaVersion int    `json:"schema_version"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &report), r.stdout+r.stderr)
	assert.Equal(t, "kurrentdb", report.Store)
	assert.Zero(t, report.SchemaVersion)
	r = cairn(t, "--store", url, "doctor")
	assert.Regexp(t, `(?m)^store +kurrentdb, schema version -$`, r.stdout)
}

// The changes run one after the other on a server of their own, in the
// order the goldens assume (as in cli's TestGoldenConsumerChanges).
func TestGoldenConsumerChangesOnKurrentDB(t *testing.T) {
	url := kurrentDB(t)
	s := openKurrentDBStore(t, url)
	stored := clitest.BuildFixture(t, s)
	clitest.BuildConsumers(t, s, stored)
	for _, tc := range clitest.ConsumerChanges {
		r := runCase(t, url, tc, stored)
		kurrentGolden(t, tc.Name, r)
		require.Equal(t, 0, r.code, "%s: %s", tc.Name, r.stderr)
	}
	clitest.CheckChanges(t, openKurrentDBStore(t, url), stored)
}

func TestGoldenSagasOnKurrentDB(t *testing.T) {
	url := kurrentDB(t)
	clitest.NewLedger(t, openKurrentDBStore(t, url))
	for _, tc := range clitest.SagasBareCases {
		t.Run(tc.Name, func(t *testing.T) {
			kurrentGolden(t, tc.Name, runCase(t, url, tc, nil))
		})
	}
}
