package kurrentdb_test

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/command/commandtest"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/kurrentdb"
	"github.com/cairn-es/cairn/eventstore/kurrentdb/internal/testserver"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/eventstore/storetest"
	"github.com/cairn-es/cairn/eventstore/storetest/linearize"
	"github.com/cairn-es/cairn/internal/testrig/counters"
	"github.com/cairn-es/cairn/projection/projectiontest"
)

// RealServerEnv names a real KurrentDB server (a connection string) that
// the suites run against as well as the test server.
const RealServerEnv = "CAIRN_KURRENTDB_URL"

// target is a KurrentDB the suites run against: newURL gives the server
// for one test.
type target struct {
	name   string
	newURL func(t testing.TB) string
}

// targets are the protocol-level test server, a new one for each test
// (they are cheap, and each test then starts from an empty log, as the
// projection suite needs), and the real server that CAIRN_KURRENTDB_URL
// names, shared by all tests, if any.
func targets() []target {
	ts := []target{{"TestServer", newTestServer}}
	if real := os.Getenv(RealServerEnv); real != "" {
		ts = append(ts, target{"RealServer", func(testing.TB) string { return real }})
	}
	return ts
}

// newTestServer starts a test server for t, configured as a KurrentDB for
// Cairn should be: appends of up to 16 MiB (the server's MaxAppendSize),
// as storetest appends several events of nearly 1 MiB at once.
func newTestServer(t testing.TB) string {
	srv, err := testserver.Start(testserver.Options{MaxAppendSize: 16 << 20})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	return srv.URL()
}

// urlOf returns the URL of the server kept for dir: the first to ask (the
// test's own process) starts it and writes its URL into dir, and the child
// processes that the crash and two-process tests start read it there.
func urlOf(t testing.TB, tg target, dir string) string {
	file := filepath.Join(dir, "kurrentdb-url")
	f, err := os.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err == nil {
		url := tg.newURL(t)
		_, err = f.WriteString(url)
		require.NoError(t, errors.Join(err, f.Close()))
		return url
	}
	require.ErrorIs(t, err, fs.ErrExist)
	url, err := os.ReadFile(file)
	require.NoError(t, err)
	return string(url)
}

// skipReal is the one line a run without a real server prints.
func skipReal(t *testing.T) {
	if os.Getenv(RealServerEnv) == "" {
		t.Run("RealServer", func(t *testing.T) {
			t.Skip(RealServerEnv + " is not set: these suites ran against the protocol-level test server only (docs/kurrentdb.md says how to run them against a real KurrentDB)")
		})
	}
}

// open returns a store on the server at url, closed when t ends.
func open(t testing.TB, url string) *kurrentdb.Store {
	s, err := kurrentdb.Open(context.Background(), url, kurrentdb.Options{PollInterval: 100 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestConformance runs storetest's every part that applies: the events,
// the consumer state the store keeps (checkpoints, leases, dead letters,
// snapshots), and the command bus's and the saga runner's suites. The
// projection suite needs a read model in the store's transactions, which
// KurrentDB has not: TestProjections runs it with the read model in
// SQLite.
func TestConformance(t *testing.T) {
	for _, tg := range targets() {
		t.Run(tg.name, func(t *testing.T) {
			storetest.Run(t, func(t testing.TB) eventstore.Store { return open(t, tg.newURL(t)) }, storetest.Options{
				Commands: commandtest.Options{HotWorkers: 16, HotIncrements: 50},
			})
		})
	}
	skipReal(t)
}

// TestProjections runs the projection suite on events in KurrentDB and
// the consumer's checkpoints, dead letters, leases and read model in a
// SQLite file, as a service that projects KurrentDB's events into a SQL
// database does. The crash and two-process tests SIGKILL consumers that
// read from the parent's test server.
func TestProjections(t *testing.T) {
	for _, tg := range targets() {
		t.Run(tg.name, func(t *testing.T) {
			c := counters.NewSQLite()
			stores := func(t testing.TB, dir string) projectiontest.Stores[*sql.Tx] {
				events := open(t, urlOf(t, tg, dir))
				consumers := c.Open(t, dir, sqlite.Options{Synchronous: sqlite.SyncNormal, PollInterval: 20 * time.Millisecond})
				return projectiontest.Stores[*sql.Tx]{Events: events, Consumers: consumers}
			}
			projectiontest.Run(t, projectiontest.Harness[*sql.Tx]{
				New:  func(t testing.TB) projectiontest.Stores[*sql.Tx] { return stores(t, t.TempDir()) },
				Open: stores,
				Add:  counters.AddSQL,
				Get: func(t testing.TB, s projectiontest.Stores[*sql.Tx], key string) int64 {
					return c.Get(t, s.Consumers.(*sqlite.Store), key)
				},
			})
		})
	}
	skipReal(t)
}

// TestLinearizable records histories of clients racing appends, repeats
// and reads and checks each with porcupine.
func TestLinearizable(t *testing.T) {
	for _, tg := range targets() {
		t.Run(tg.name, func(t *testing.T) {
			linearize.Run(t, func(t *testing.T) eventstore.Store { return open(t, tg.newURL(t)) }, linearize.Sized(t))
		})
	}
	skipReal(t)
}
