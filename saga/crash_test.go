package saga_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/internal/pgtest"
	"github.com/cairn-es/cairn/internal/reservation"
	"github.com/cairn-es/cairn/saga"
	"github.com/cairn-es/cairn/saga/sagatest"
)

const (
	sagaCrashChildEnv = "CAIRN_SAGA_CRASH_CHILD"
	sagaCrashCycles   = 50
	sagaCrashOrders   = 60
)

// TestCrashSQLite and TestCrashPostgres run the reservation flow in a
// child process that is SIGKILLed at random moments 50 times, then once
// more to the end: every order must end as its inputs dictate, with every
// command applied exactly once.
func TestCrashSQLite(t *testing.T) {
	if testing.Short() {
		t.Skip("kills child processes; skipped in -short mode")
	}
	runSagaCrash(t, "sqlite:"+filepath.Join(t.TempDir(), "events.db"))
}

func TestCrashPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("kills child processes; skipped in -short mode")
	}
	server := pgtest.ForTest(t, pgtest.Options{})
	runSagaCrash(t, "postgres:"+server.NewSchema("crash")+"|"+server.URL)
}

func runSagaCrash(t *testing.T, store string) {
	epoch := strconv.FormatInt(time.Now().UnixNano(), 10)
	ready := filepath.Join(t.TempDir(), "ready")
	run := func(kill time.Duration, final bool) (killed bool) {
		_ = os.Remove(ready)
		cmd := exec.Command(os.Args[0], "-test.run=^TestSagaCrashChild$", "-test.v")
		cmd.Env = append(os.Environ(), sagaCrashChildEnv+"=1", "CAIRN_SAGA_STORE="+store, "CAIRN_SAGA_EPOCH="+epoch,
			fmt.Sprint("CAIRN_SAGA_FINAL=", final), "CAIRN_SAGA_READY="+ready)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		require.NoError(t, cmd.Start())
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		if final {
			require.NoError(t, <-done, "final child output:\n%s", out.String())
			return false
		}
		// The kill lands at a random moment after the child has opened the
		// store and started the saga: start-up alone is not the test.
		for start := time.Now(); ; time.Sleep(time.Millisecond) {
			if _, err := os.Stat(ready); err == nil {
				break
			}
			select {
			case err := <-done:
				require.NoError(t, err, "child ended before it was ready:\n%s", out.String())
				return false
			default:
			}
			if time.Since(start) > time.Minute {
				_ = cmd.Process.Signal(syscall.SIGKILL)
				<-done
				require.FailNow(t, "the child did not start within a minute", out.String())
			}
		}
		select {
		case err := <-done:
			require.NoError(t, err, "child ended before it was killed:\n%s", out.String())
			return false
		case <-time.After(kill):
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		return <-done != nil
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 13))
	kills := 0
	for range sagaCrashCycles {
		if run(time.Duration(rng.IntN(500))*time.Millisecond, false) {
			kills++
		}
	}
	reg := crashSagaRegistry(t)
	s, closeStore := openCrashStore(t, store)
	steps := countSteps(t, s)
	closeStore()
	run(0, true)
	t.Logf("%d of %d cycles killed the child; %d saga steps were stored before the final run", kills, sagaCrashCycles, steps)
	require.Greater(t, kills, sagaCrashCycles/2, "most cycles must kill a working child")
	require.Positive(t, steps, "the killed children must have got work done")

	s, closeStore = openCrashStore(t, store)
	defer closeStore()
	verifyOrders(t, s, reg)
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

// verifyOrders checks every order's end, and that each of its streams holds
// exactly the events of commands applied once.
func verifyOrders(t *testing.T, s eventstore.Store, reg *codec.Registry) {
	check, err := reservation.NewChecker(s, reg)
	require.NoError(t, err)
	for i := range sagaCrashOrders {
		id, seats, amount := crashOrder(i)
		problems, err := check.Check(context.Background(), id, reservation.Inputs{Seats: seats, Amount: amount})
		require.NoError(t, err)
		assert.Empty(t, problems, "order %s", id)
	}
}

func crashOrder(i int) (id string, seats, amount int) {
	return fmt.Sprintf("o%03d", i), 1 + i%12, 100 + 97*i
}

func crashSagaRegistry(t testing.TB) *codec.Registry {
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, reservation.Register(reg))
	return reg
}

func openCrashStore(t testing.TB, store string) (eventstore.Store, func()) {
	ctx := context.Background()
	kind, where, _ := strings.Cut(store, ":")
	switch kind {
	case "sqlite":
		s, err := sqlite.Open(ctx, where, sqlite.Options{})
		require.NoError(t, err)
		return s, func() { _ = s.Close() }
	default:
		schema, url, _ := strings.Cut(where, "|")
		s, err := postgres.Open(ctx, url, postgres.Options{Schema: schema})
		require.NoError(t, err)
		return s, func() { _ = s.Close() }
	}
}

// TestSagaCrashChild is the child of the crash tests; it does nothing in a
// normal test run. It places every order (again: placing is idempotent by
// command ID) while the saga runs, until it is killed or, in the final run,
// every order has ended.
func TestSagaCrashChild(t *testing.T) {
	if os.Getenv(sagaCrashChildEnv) != "1" {
		t.Skip("child process of the saga crash tests")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, closeStore := openCrashStore(t, os.Getenv("CAIRN_SAGA_STORE"))
	defer closeStore()
	nanos, err := strconv.ParseInt(os.Getenv("CAIRN_SAGA_EPOCH"), 10, 64)
	require.NoError(t, err)
	reg := crashSagaRegistry(t)
	bus := command.New(s, reg, command.Options{})
	require.NoError(t, reservation.Route(bus))
	sale, err := reservation.NewSale(reg)
	require.NoError(t, err)
	// Time stands still while children are killed, so that no payment
	// deadline races its payment; the final run moves it past the window
	// once every order that needs no deadline has ended, and the deadlines
	// that killed children scheduled fire then.
	clock := sagatest.NewClock(time.Unix(0, nanos))
	r, err := saga.NewRunner(sale, s, bus, saga.RunnerOptions{Clock: clock,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxBatchDelay: time.Millisecond})
	require.NoError(t, err)
	ran := make(chan error, 1)
	go func() { ran <- r.Run(ctx) }()
	require.NoError(t, os.WriteFile(os.Getenv("CAIRN_SAGA_READY"), nil, 0o600))

	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < sagaCrashOrders; i += 4 {
				id, seats, amount := crashOrder(i)
				_, err := bus.Dispatch(ctx, command.Message{ID: "place-" + id,
					Command: reservation.PlaceOrder{OrderID: id, Seats: seats, Amount: amount}})
				require.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	if os.Getenv("CAIRN_SAGA_FINAL") != "true" {
		<-ctx.Done() // run until killed
	}
	orders, err := aggregate.NewRepository(s, reg, reservation.Orders, aggregate.RepositoryOptions{})
	require.NoError(t, err)
	seats, err := aggregate.NewRepository(s, reg, reservation.Reserves, aggregate.RepositoryOptions{})
	require.NoError(t, err)
	ended := func(withDeadlines bool) bool {
		for i := range sagaCrashOrders {
			id, st, amount := crashOrder(i)
			want := reservation.Expect(st, amount)
			if want.AfterDeadline && !withDeadlines {
				continue
			}
			o, err := orders.Load(ctx, id)
			require.NoError(t, err)
			r, err := seats.Load(ctx, id)
			require.NoError(t, err)
			if !o.State.Confirmed && !o.State.Rejected || want.Cancelled && !r.State.Cancelled {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, withDeadlines := range []bool{false, true} {
		for !ended(withDeadlines) {
			require.True(t, time.Now().Before(deadline), "the final run did not end every order within 2 minutes")
			time.Sleep(20 * time.Millisecond)
		}
		clock.Advance(reservation.PaymentWindow)
	}
	cancel()
	require.NoError(t, <-ran)
}
