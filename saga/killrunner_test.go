package saga_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/testrig/pgtest"
	"github.com/cairn-es/cairn/internal/testrig/reservation"
	"github.com/cairn-es/cairn/projection"
	"github.com/cairn-es/cairn/saga"
	"github.com/cairn-es/cairn/saga/sagatest"
)

// The killed-runner tests: two child processes run the sale with leases
// and four segments; one is SIGKILLed while orders are placed, so that
// nothing it held is released; the other takes every segment once the
// dead one's leases lapse, and ends every order.

const (
	segmentChildEnv = "CAIRN_SAGA_SEGMENT_CHILD"
	// segmentChildTTL is long enough that renewals on SQLite, whose one
	// writer two children and the observer share, keep up under the race
	// detector while `go test` runs other packages beside this one.
	segmentChildTTL = 3 * time.Second
	segmentCount    = 4
)

func TestKilledRunnerSQLite(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes; skipped in -short mode")
	}
	runKilledRunner(t, "sqlite:"+filepath.Join(t.TempDir(), "events.db"))
}

func TestKilledRunnerPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes; skipped in -short mode")
	}
	server := pgtest.ForTest(t, pgtest.Options{})
	runKilledRunner(t, "postgres:"+server.TempSchema(t, "killed")+"|"+server.URL)
}

// segmentChild is a child process running the sale.
type segmentChild struct {
	holder string
	cmd    *exec.Cmd
	out    *lockedLog
	done   chan error
}

func startSegmentChild(t *testing.T, store, dir, holder, epoch string) *segmentChild {
	t.Helper()
	ready := filepath.Join(dir, holder+".ready")
	c := &segmentChild{holder: holder, out: &lockedLog{}, done: make(chan error, 1)}
	c.cmd = exec.Command(os.Args[0], "-test.run=^TestSegmentRunnerChild$", "-test.v")
	c.cmd.Env = append(os.Environ(), segmentChildEnv+"=1", "CAIRN_SAGA_STORE="+store, "CAIRN_SAGA_EPOCH="+epoch,
		"CAIRN_SAGA_HOLDER="+holder, "CAIRN_SAGA_DIR="+dir)
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	require.NoError(t, c.cmd.Start())
	go func() { c.done <- c.cmd.Wait() }()
	t.Cleanup(func() {
		_ = c.cmd.Process.Signal(syscall.SIGKILL)
		if t.Failed() {
			t.Logf("child %s:\n%s", holder, c.out.String())
		}
	})
	require.Eventually(t, func() bool {
		_, err := os.Stat(ready)
		return err == nil
	}, time.Minute, 5*time.Millisecond, "child %s did not start", holder)
	return c
}

func runKilledRunner(t *testing.T, store string) {
	dir := t.TempDir()
	epoch := strconv.FormatInt(time.Now().UnixNano(), 10)
	s, closeStore := openCrashStore(t, store)
	t.Cleanup(closeStore)
	stores := twoRunnerStores{events: s, consumers: s.(sagatest.ConsumerStore), leases: s.(storekit.LeaseStore)}
	f := newSale(t, stores)

	a := startSegmentChild(t, store, dir, "A", epoch)
	b := startSegmentChild(t, store, dir, "B", epoch)
	require.Eventually(t, func() bool {
		h := segmentHolders(stores.leases)
		return h["A"] > 0 && h["B"] > 0 && h["A"]+h["B"] == 2*segmentCount
	}, twoRunnerWait, 10*time.Millisecond, "the children did not split the segments")

	f.place(t, 0, twoRunnerOrders/2)
	// A dies once it has set a payment deadline in one of its segments,
	// which B must then fire.
	require.Eventually(t, func() bool {
		ofA := make(map[int]bool)
		for k := range segmentCount {
			_, outbox := segmentLeases(k)
			h, known := leaseHolder(stores.leases, outbox)
			if !known {
				return false
			}
			ofA[k] = h == "A"
		}
		for i := range twoRunnerOrders / 2 {
			id, seats, amount := twoRunnerOrder(i)
			if !reservation.Expect(seats, amount).AfterDeadline || !ofA[saga.Segment(id, segmentCount)] {
				continue
			}
			end, err := f.check.End(context.Background(), id)
			require.NoError(t, err)
			if end.Pending {
				return true
			}
		}
		return false
	}, twoRunnerWait, 10*time.Millisecond, "A set no deadline")
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGKILL))
	require.Error(t, <-a.done, "A was killed")
	f.place(t, twoRunnerOrders/2, twoRunnerOrders)

	require.Eventually(t, func() bool { return segmentHolders(stores.leases)["B"] == 2*segmentCount }, twoRunnerWait, 10*time.Millisecond,
		"B did not take every segment")
	require.Eventually(t, func() bool { return f.ended(t, false) }, twoRunnerWait, 10*time.Millisecond,
		"the orders that need no deadline did not end")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "advance"), nil, 0o600))
	require.Eventually(t, func() bool { return f.ended(t, true) }, twoRunnerWait, 10*time.Millisecond,
		"the orders that wait for their payment deadline did not end")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "stop"), nil, 0o600))
	require.NoError(t, <-b.done, "B ends cleanly")
	f.verify(t)
}

// segmentLeases returns the lease names of segment k's consumers.
func segmentLeases(k int) (events, outbox string) {
	events = fmt.Sprintf("saga:sale#%d/%d", k, segmentCount)
	return events, events + ":outbox"
}

// leaseHolder returns who holds lease name ("" for no one), asking for it
// with the shortest TTL: a held lease is refused and names its holder; a
// free one is granted for a millisecond, and lapses. known is false when
// the store did not answer (SQLite busy with the children's writes, on a
// loaded machine): the caller asks again.
func leaseHolder(leases storekit.LeaseStore, name string) (holder string, known bool) {
	l, ok, err := leases.AcquireLease(context.Background(), name, "observer", storekit.MinLeaseTTL)
	switch {
	case err != nil:
		return "", false
	case ok:
		return "", true
	}
	return projection.ProcessHolder(l.Holder), true // a consumer's session holds it as "<Holder>/<ULID>"
}

// segmentHolders counts, by holder, the segment consumers' leases held;
// nil when the store did not answer for one of them.
func segmentHolders(leases storekit.LeaseStore) map[string]int {
	out := make(map[string]int)
	for k := range segmentCount {
		events, outbox := segmentLeases(k)
		for _, name := range []string{events, outbox} {
			h, known := leaseHolder(leases, name)
			if !known {
				return nil
			}
			if h != "" {
				out[h]++
			}
		}
	}
	return out
}

// TestSegmentRunnerChild is the child of the killed-runner tests; it does
// nothing in a normal test run. It runs the sale with leases and four
// segments until it is killed or told to stop, and moves its clock past
// the payment window when told to.
func TestSegmentRunnerChild(t *testing.T) {
	if os.Getenv(segmentChildEnv) != "1" {
		t.Skip("child process of the killed-runner tests")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, closeStore := openCrashStore(t, os.Getenv("CAIRN_SAGA_STORE"))
	defer closeStore()
	nanos, err := strconv.ParseInt(os.Getenv("CAIRN_SAGA_EPOCH"), 10, 64)
	require.NoError(t, err)
	holder, dir := os.Getenv("CAIRN_SAGA_HOLDER"), os.Getenv("CAIRN_SAGA_DIR")
	reg := crashSagaRegistry(t)
	bus := command.New(s, reg, command.Options{})
	require.NoError(t, reservation.Route(bus))
	st, err := reservation.NewSale(reg)
	require.NoError(t, err)
	clock := sagatest.NewClock(time.Unix(0, nanos))
	r, err := saga.NewRunner(st, s, bus, saga.RunnerOptions{Clock: clock, Segments: segmentCount,
		Exclusive: true, LeaseTTL: segmentChildTTL, Holder: holder, MaxBatchDelay: time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)).With(slog.String("process", holder))})
	require.NoError(t, err)
	ran := make(chan error, 1)
	go func() { ran <- r.Run(ctx) }()
	require.NoError(t, os.WriteFile(filepath.Join(dir, holder+".ready"), nil, 0o600))

	var once sync.Once
	for {
		if _, err := os.Stat(filepath.Join(dir, "advance")); err == nil {
			once.Do(func() { clock.Advance(reservation.PaymentWindow) })
		}
		if _, err := os.Stat(filepath.Join(dir, "stop")); err == nil {
			break
		}
		select {
		case err := <-ran:
			require.NoError(t, err)
			require.FailNow(t, "Run ended before the child was told to stop")
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	require.NoError(t, <-ran)
	if st, err := r.Stats(context.Background()); err == nil {
		t.Logf("%s: %d handled, %d duplicates", holder, st.Handled, st.Duplicates)
	}
}
