package soak_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/internal/testrig/reservation"
	"github.com/cairn-es/cairn/saga"
)

// The runner's side of the soak: a child process (this test binary,
// re-executed) that runs the sale saga on the soak's SQLite file until its
// stdin closes or it is SIGKILLed, printing a sample line every so often.

const (
	childEnv       = "CAIRN_SOAK_CHILD"
	childDBEnv     = "CAIRN_SOAK_DB"
	childSampleEnv = "CAIRN_SOAK_SAMPLE_EVERY"
	// leakEnv makes the runner process keep this many bytes a second for
	// good: a leak planted to show that the soak's judgements catch one in
	// a real run (docs/reliability.md). Unset, nothing is kept.
	leakEnv      = "CAIRN_SOAK_LEAK"
	samplePrefix = "soak-sample "
)

// childSample is what a runner process reports of itself.
type childSample struct {
	// Age is how long the process has run.
	Age time.Duration `json:"age"`
	procMetrics
	// The runner's Stats: counts since the process started, then what is
	// parked, pending and open now.
	Handled    int64 `json:"handled"`
	Duplicates int64 `json:"duplicates"`
	Ignored    int64 `json:"ignored"`
	Conflicts  int64 `json:"conflicts"`
	Parked     int   `json:"parked_instances"`
	Deadlines  int   `json:"deadlines_pending"`
	Gaps       int   `json:"gaps"`
	// StatsError is why Stats failed, if it did.
	StatsError string `json:"stats_error,omitempty"`
}

// procMetrics are a process's memory and goroutines, read through
// runtime/metrics, which needs no stop-the-world and forces no GC.
type procMetrics struct {
	// HeapLive is /gc/heap/live:bytes, the heap that the latest GC found
	// reachable: what a leak makes grow, free of the garbage that
	// HeapInuse also counts until the next cycle. It is the series judged.
	HeapLive uint64 `json:"heap_live"`
	// HeapObjects is /memory/classes/heap/objects:bytes, live objects and
	// not yet swept garbage, the closest metric to MemStats.HeapAlloc:
	// reported beside HeapLive.
	HeapObjects uint64 `json:"heap_objects"`
	Goroutines  uint64 `json:"goroutines"`
	// RSS is the process's resident memory, from /proc/self/statm (zero
	// where there is none): it holds what the Go heap does not, such as
	// the memory SQLite allocates through modernc.org/libc (its page
	// cache, its prepared statements).
	RSS uint64 `json:"rss"`
}

func readProcMetrics() procMetrics {
	ms := []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/sched/goroutines:goroutines"},
	}
	metrics.Read(ms)
	return procMetrics{HeapLive: ms[0].Value.Uint64(), HeapObjects: ms[1].Value.Uint64(), Goroutines: ms[2].Value.Uint64(), RSS: residentBytes()}
}

// residentBytes reads the resident set size from /proc/self/statm (in
// pages, its second field); zero when it cannot.
func residentBytes() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * uint64(os.Getpagesize())
}

// TestSoakChild is the runner process of the soak tests; it does nothing
// in a normal test run.
func TestSoakChild(t *testing.T) {
	if os.Getenv(childEnv) != "1" {
		t.Skip("child process of the soak tests")
	}
	began := time.Now()
	every, err := time.ParseDuration(os.Getenv(childSampleEnv))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// The parent closes stdin to stop the last runner cleanly.
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	s, err := sqlite.Open(context.Background(), os.Getenv(childDBEnv), sqlite.Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	reg := soakRegistry(t)
	bus := command.New(s, reg, command.Options{})
	require.NoError(t, reservation.Route(bus))
	sale, err := reservation.NewSale(reg)
	require.NoError(t, err)
	r, err := saga.NewRunner(sale, s, bus, saga.RunnerOptions{
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	require.NoError(t, err)
	ran := make(chan error, 1)
	go func() { ran <- r.Run(ctx) }()
	if leak := os.Getenv(leakEnv); leak != "" {
		perSecond, err := strconv.Atoi(leak)
		require.NoError(t, err, leakEnv)
		go plantLeak(ctx, perSecond)
	}

	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		sample := childSample{Age: time.Since(began), procMetrics: readProcMetrics()}
		if st, err := r.Stats(ctx); err != nil {
			sample.StatsError = err.Error()
		} else {
			sample.Handled, sample.Duplicates, sample.Ignored = st.Handled, st.Duplicates, st.Ignored
			sample.Conflicts, sample.Parked = st.Conflicts, st.ParkedInstances
			sample.Deadlines, sample.Gaps = st.DeadlinesPending, st.Gaps
		}
		line, err := json.Marshal(sample)
		require.NoError(t, err)
		fmt.Printf("%s%s\n", samplePrefix, line)
		select {
		case err := <-ran:
			require.NoError(t, err, "Run ended before it was asked to")
			require.FailNow(t, "Run returned before the parent stopped it")
		case <-ctx.Done():
			require.NoError(t, <-ran)
			return
		case <-tick.C:
		}
	}
}

// plantLeak keeps perSecond bytes a second until ctx ends, in pieces of a
// tenth of that, written to so that they are real memory.
func plantLeak(ctx context.Context, perSecond int) {
	var kept [][]byte
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			runtime.KeepAlive(kept)
			return
		case <-tick.C:
			b := make([]byte, perSecond/10)
			for i := range b {
				b[i] = byte(i)
			}
			kept = append(kept, b)
		}
	}
}
