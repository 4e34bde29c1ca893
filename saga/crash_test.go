package saga_test

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/testrig/flowtest"
	"github.com/cairn-es/cairn/internal/testrig/pgtest"
	"github.com/cairn-es/cairn/saga"
)

const (
	sagaCrashCycles = 50
	sagaCrashOrders = 60
)

// TestCrashSQLite and TestCrashPostgres run the reservation flow in a
// child process that is SIGKILLed at random moments 50 times, then once
// more to the end: every order must end as its inputs dictate, with every
// command applied exactly once (internal/testrig/flowtest.Check). The crash matrix
// (internal/testrig/crashmatrix) kills at named points instead.
func TestCrashSQLite(t *testing.T) {
	if testing.Short() {
		t.Skip("kills child processes; skipped in -short mode")
	}
	runSagaCrash(t, flowtest.SQLite(filepath.Join(t.TempDir(), "events.db")))
}

func TestCrashPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("kills child processes; skipped in -short mode")
	}
	server := pgtest.ForTest(t, pgtest.Options{})
	runSagaCrash(t, flowtest.Postgres(server.URL, server.NewSchema("crash")))
}

func runSagaCrash(t *testing.T, store string) {
	cfg := flowtest.Config{Store: store, Orders: flowtest.Fixed(sagaCrashOrders), Epoch: time.Now(),
		Ready: filepath.Join(t.TempDir(), "ready")}
	run := func(kill time.Duration, final bool) (killed bool) {
		_ = os.Remove(cfg.Ready)
		cfg.Finish = final
		cmd := exec.Command(os.Args[0], "-test.run=^TestSagaCrashChild$", "-test.v")
		cmd.Env = append(os.Environ(), cfg.Env()...)
		child, err := flowtest.StartChild(cmd)
		require.NoError(t, err)
		if final {
			require.NoError(t, child.Wait(3*time.Minute))
			require.NoError(t, child.Err(), "final child output:\n%s", child.Output())
			return false
		}
		// The kill lands at a random moment after the child has opened the
		// store and started the saga: start-up alone is not the test.
		ready, err := child.WaitFile(cfg.Ready, time.Minute)
		require.NoError(t, err, child.Output())
		if !ready {
			require.NoError(t, child.Err(), "child ended before it was ready:\n%s", child.Output())
			return false
		}
		select {
		case <-child.Done():
			require.NoError(t, child.Err(), "child ended before it was killed:\n%s", child.Output())
			return false
		case <-time.After(kill):
		}
		child.Kill()
		return child.Killed()
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 13))
	kills := 0
	for range sagaCrashCycles {
		if run(time.Duration(rng.IntN(500))*time.Millisecond, false) {
			kills++
		}
	}
	ctx := context.Background()
	s, err := flowtest.Open(ctx, store)
	require.NoError(t, err)
	steps := countSteps(t, s)
	require.NoError(t, s.Close())
	run(0, true)
	t.Logf("%d of %d cycles killed the child; %d saga steps were stored before the final run", kills, sagaCrashCycles, steps)
	require.Greater(t, kills, sagaCrashCycles/2, "most cycles must kill a working child")
	require.Positive(t, steps, "the killed children must have got work done")

	s, err = flowtest.Open(ctx, store)
	require.NoError(t, err)
	defer s.Close()
	tally, err := flowtest.Check(ctx, s, cfg.Orders, nil, false)
	require.NoError(t, err)
	require.True(t, tally.Valid(), "%+v\n%s", tally, strings.Join(tally.Problems, "\n"))
}

// countSteps counts the saga step records stored.
func countSteps(t *testing.T, s eventstore.Store) int {
	n := 0
	for _, err := range s.ReadAll(context.Background(), eventstore.Start, eventstore.Filter{StreamPrefixes: []string{saga.StreamPrefix}}) {
		require.NoError(t, err)
		n++
	}
	return n
}

// TestSagaCrashChild is the child of the crash tests; it does nothing in a
// normal test run. It places every order (again: placing is idempotent by
// command ID) while the saga runs, until it is killed or, in the final run,
// every order has ended.
func TestSagaCrashChild(t *testing.T) {
	cfg, ok, err := flowtest.FromEnv()
	if !ok {
		t.Skip("child process of the saga crash tests")
	}
	require.NoError(t, err)
	require.NoError(t, flowtest.Run(context.Background(), cfg))
}

// openCrashStore opens the store a crash test's spec names (see
// flowtest.SQLite and flowtest.Postgres), for the tests of several
// processes.
func openCrashStore(t testing.TB, store string) (eventstore.Store, func()) {
	s, err := flowtest.Open(context.Background(), store)
	require.NoError(t, err)
	return s, func() { _ = s.Close() }
}

// crashSagaRegistry returns a registry of the reservation flow's types.
func crashSagaRegistry(t testing.TB) *codec.Registry {
	reg, err := flowtest.Registry()
	require.NoError(t, err)
	return reg
}
