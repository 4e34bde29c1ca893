package crashmatrix_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/internal/failpoint"
	"github.com/cairn-es/cairn/internal/testrig/flowtest"
	"github.com/cairn-es/cairn/internal/testrig/pgtest"
)

// Sizes. `make test` runs the small slice: every failpoint on SQLite with
// seeds 1 and 2, and three failpoints on PostgreSQL with seed 1.
// CAIRN_TORTURE=1 (`make torture`) runs seeds 1 to 100 of every cell.
// CAIRN_CRASHMATRIX_SEEDS=a-b picks the seeds, CAIRN_CRASHMATRIX_STORES
// (sqlite,postgres) the stores and CAIRN_CRASHMATRIX_FAILPOINTS the
// failpoints, to repeat one cell or a slice.
const (
	orders        = 16
	tortureSeeds  = 100
	envTorture    = "CAIRN_TORTURE"
	envSeeds      = "CAIRN_CRASHMATRIX_SEEDS"
	envStores     = "CAIRN_CRASHMATRIX_STORES"
	envFailpoints = "CAIRN_CRASHMATRIX_FAILPOINTS"
	envReport     = "CAIRN_CRASHMATRIX_REPORT"
	childLimit    = 3 * time.Minute
	// drainLimit bounds how long a child waits for every order to end: a
	// few seconds suffice, even on a loaded machine; past it the orders
	// that have not ended are lost.
	drainLimit     = time.Minute
	hitsLinePrefix = "failpoint hits:"
)

// smallPostgres are the failpoints `make test` runs on PostgreSQL: one of
// the bus, one of the saga, one of the checkpoints.
var smallPostgres = []string{failpoint.BusAfterAppend, failpoint.SagaAfterStepAppend, failpoint.CheckpointBeforeSave}

// TestCrashMatrix runs the matrix (see the package comment). A cell passes
// when its first child died by SIGKILL at the armed hit (a child that ends
// on its own never reached it, which fails the cell), its second child
// ended every order, and every order was applied exactly once: none lost,
// duplicated or unexpected.
func TestCrashMatrix(t *testing.T) {
	if !failpoint.Enabled {
		t.Skip("the crash matrix needs a test binary built with -tags " + failpoint.Tag +
			"; `make test` runs it: go test -tags " + failpoint.Tag + " ./internal/testrig/crashmatrix/")
	}
	if testing.Short() {
		t.Skip("kills child processes; skipped in -short mode")
	}
	torture := os.Getenv(envTorture) == "1"
	seeds := []uint64{1, 2}
	if torture {
		seeds = seedRange(1, tortureSeeds)
	}
	if v := os.Getenv(envSeeds); v != "" {
		var err error
		seeds, err = parseSeeds(v)
		require.NoError(t, err)
	}
	stores := []string{"sqlite", "postgres"}
	if v := os.Getenv(envStores); v != "" {
		stores = strings.Split(v, ",")
	}
	points := failpoint.Names()
	if v := os.Getenv(envFailpoints); v != "" {
		points = strings.Split(v, ",")
	}

	results := newResults()
	t.Cleanup(func() { results.report(t) })
	for _, store := range stores {
		t.Run(store, func(t *testing.T) {
			var server *pgtest.Server
			if store == "postgres" {
				server = pgtest.ForTest(t, pgtest.Options{})
			}
			for _, fp := range points {
				cellSeeds := seeds
				if store == "postgres" && !torture && os.Getenv(envSeeds) == "" && os.Getenv(envFailpoints) == "" {
					if !slices.Contains(smallPostgres, fp) {
						continue
					}
					cellSeeds = seeds[:1]
				}
				t.Run(fp, func(t *testing.T) {
					for _, seed := range cellSeeds {
						t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
							spec := flowtest.SQLite(filepath.Join(t.TempDir(), "events.db"))
							if server != nil {
								spec = flowtest.Postgres(server.URL, server.TempSchema(t, "crashmatrix"))
							}
							tally := runCell(t, spec, fp, seed)
							results.add(store, fp, seed, tally)
						})
					}
				})
			}
		})
	}
}

// hitLimit bounds the hit of fp that a cell arms: no more than the fewest
// hits a full run of the flow makes for these orders, so that every cell
// reaches its failpoint. bus: the placement, the reservation and the
// order's end each decide and append, 3 per order at least; saga: two
// steps (placed, reserved or not) and outbox: two commands, per order at
// least; checkpoints: how many batches the three consumers (the saga's
// events and outbox, the read model) make is not fixed, as live events
// coalesce into batches, so one per order, below the 27 to 37 per 16
// orders that calibration runs made; deadlines: one
// per order that waits for its payment.
func hitLimit(fp string, os []flowtest.Order) int {
	switch fp {
	case failpoint.BusAfterDecide, failpoint.BusBeforeAppend, failpoint.BusAfterAppend:
		return 3 * len(os)
	case failpoint.SagaBeforeStepAppend, failpoint.SagaAfterStepAppend, failpoint.OutboxAfterDispatch:
		return 2 * len(os)
	case failpoint.CheckpointBeforeSave, failpoint.CheckpointAfterSave:
		return len(os)
	case failpoint.DeadlineAfterFire:
		return max(1, flowtest.Deadlines(os))
	}
	panic("no hit limit for failpoint " + fp)
}

// armed returns the spec that cell (fp, seed) arms: a hit drawn from the
// seed, from 1 to hitLimit.
func armed(fp string, seed uint64, os []flowtest.Order) failpoint.Spec {
	h := fnv.New64a()
	_, _ = h.Write([]byte(fp))
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))
	return failpoint.Spec{Name: fp, Hit: 1 + rng.Int64N(int64(hitLimit(fp, os)))}
}

// runCell runs one cell and returns its tally.
func runCell(t *testing.T, spec, fp string, seed uint64) flowtest.Tally {
	dir := t.TempDir()
	cfg := flowtest.Config{Store: spec, Orders: flowtest.Seeded(seed, orders), Epoch: time.Unix(1_700_000_000, 0),
		Acks: filepath.Join(dir, "acks"), Finish: true, ReadModel: true, Limit: drainLimit}
	arm := armed(fp, seed, cfg.Orders)

	crash := startChild(t, cfg, arm.String())
	require.NoError(t, crash.Wait(childLimit), crash.Output())
	marker := fmt.Sprintf("failpoint: %s: SIGKILL", arm)
	if !crash.Killed() {
		require.FailNow(t, "the failpoint was never reached: the child ended on its own",
			"armed %s; the child ended with %v; %s", arm, crash.Err(), hitsLine(crash.Output()))
	}
	require.Contains(t, crash.Output(), marker, "the child died by SIGKILL, but not at the failpoint")
	acked, err := flowtest.Acked(cfg.Acks) // what the queue would not redeliver
	require.NoError(t, err)

	drain := startChild(t, cfg, "")
	require.NoError(t, drain.Wait(childLimit), drain.Output())
	// A drain that fails is checked too: the tally says what is missing.
	drained := drain.Err()

	ctx := context.Background()
	s, err := flowtest.Open(ctx, spec)
	require.NoError(t, err)
	defer s.Close()
	tally, err := flowtest.Check(ctx, s, cfg.Orders, acked, true)
	require.NoError(t, err)
	t.Logf("armed %s: %d orders, %d acknowledged before the kill; applied %d, lost %d, duplicated %d, unexpected %d",
		arm, tally.Attempts, tally.Acknowledged, tally.Applied, tally.Lost, tally.Duplicated, tally.Unexpected)
	require.True(t, tally.Valid(), "armed %s (reproduce: %s)\n%s", arm, reproduce(spec, fp, seed), strings.Join(tally.Problems, "\n"))
	require.NoError(t, drained, "the draining child failed:\n%s", drain.Output())
	return tally
}

// startChild starts TestCrashMatrixChild with cfg, armed with fp (none
// when empty).
func startChild(t *testing.T, cfg flowtest.Config, fp string) *flowtest.Child {
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashMatrixChild$", "-test.v")
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, failpoint.Env+"=") })
	cmd.Env = append(append(env, cfg.Env()...), failpoint.Env+"="+fp)
	child, err := flowtest.StartChild(cmd)
	require.NoError(t, err)
	t.Cleanup(func() {
		select {
		case <-child.Done():
		default:
			child.Kill()
		}
	})
	return child
}

// hitsLine returns the line where a child that ended on its own told its
// failpoint hits.
func hitsLine(out string) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, hitsLinePrefix) {
			return strings.TrimSpace(line)
		}
	}
	return "(no hits line in its output)\n" + out
}

func reproduce(spec, fp string, seed uint64) string {
	return fmt.Sprintf("%s=%d %s=%s %s=%s go test -tags %s -count=1 -run 'TestCrashMatrix/%s/%s/seed=%d$' ./internal/testrig/crashmatrix/",
		envSeeds, seed, envStores, flowtest.StoreKind(spec), envFailpoints, fp, failpoint.Tag, flowtest.StoreKind(spec), fp, seed)
}

// TestCrashMatrixChild is a child of the crash matrix; it does nothing in a
// normal test run. It runs the flow to its end, unless the armed failpoint
// kills it first, and then says how often each failpoint was hit.
func TestCrashMatrixChild(t *testing.T) {
	cfg, ok, err := flowtest.FromEnv()
	if !ok {
		t.Skip("child process of TestCrashMatrix")
	}
	require.NoError(t, err)
	_, err = failpoint.Armed()
	require.NoError(t, err)
	require.NoError(t, flowtest.Run(context.Background(), cfg))
	var hits []string
	for _, name := range failpoint.Names() {
		hits = append(hits, fmt.Sprintf("%s=%d", name, failpoint.Hits(name)))
	}
	fmt.Println(hitsLinePrefix, strings.Join(hits, " "))
}

func seedRange(from, to uint64) []uint64 {
	var s []uint64
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

// parseSeeds reads "a-b" or "a,b,c".
func parseSeeds(v string) ([]uint64, error) {
	if from, to, ok := strings.Cut(v, "-"); ok {
		a, err1 := strconv.ParseUint(from, 10, 64)
		b, err2 := strconv.ParseUint(to, 10, 64)
		if err1 != nil || err2 != nil || a > b {
			return nil, fmt.Errorf("%s=%q: want a-b with a <= b", envSeeds, v)
		}
		return seedRange(a, b), nil
	}
	var seeds []uint64
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: %w", envSeeds, v, err)
		}
		seeds = append(seeds, n)
	}
	return seeds, nil
}

// results gathers the cells' tallies per store and failpoint.
type results struct {
	mu    sync.Mutex
	cells map[[2]string]*row
}

type row struct {
	tally flowtest.Tally
	seeds []uint64
}

func newResults() *results { return &results{cells: make(map[[2]string]*row)} }

func (r *results) add(store, fp string, seed uint64, t flowtest.Tally) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := [2]string{store, fp}
	if r.cells[k] == nil {
		r.cells[k] = &row{}
	}
	r.cells[k].tally.Add(t)
	r.cells[k].seeds = append(r.cells[k].seeds, seed)
}

// report logs the table of the cells that passed (a failed cell fails the
// test on its own) and writes it to the file CAIRN_CRASHMATRIX_REPORT
// names, if any.
func (r *results) report(t *testing.T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	b.WriteString("| store | failpoint | cells | attempts | acknowledged | applied | lost | duplicated | unexpected | valid? | seeds |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |\n")
	keys := make([][2]string, 0, len(r.cells))
	for k := range r.cells {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int {
		if c := strings.Compare(a[0], b[0]); c != 0 {
			return -c // sqlite first
		}
		return slices.Index(failpoint.Names(), a[1]) - slices.Index(failpoint.Names(), b[1])
	})
	for _, k := range keys {
		c := r.cells[k]
		tl := c.tally
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %d | %d | %d | %t | %s |\n", k[0], k[1], len(c.seeds), tl.Attempts, tl.Acknowledged,
			tl.Applied, tl.Lost, tl.Duplicated, tl.Unexpected, tl.Valid(), seedList(c.seeds))
	}
	t.Logf("crash matrix:\n%s", b.String())
	if path := os.Getenv(envReport); path != "" {
		require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	}
}

// seedList writes sorted seeds as ranges: "1-100", "1,3".
func seedList(seeds []uint64) string {
	s := slices.Clone(seeds)
	slices.Sort(s)
	var parts []string
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", s[i], s[j]))
		} else {
			parts = append(parts, strconv.FormatUint(s[i], 10))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
