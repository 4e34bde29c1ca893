package sqlite_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/internal/testrig/race"
)

// crashChildEnv switches the test binary into the appender that
// TestCrashSafety kills; its value is the database path.
const crashChildEnv = "CAIRN_SQLITE_CRASH_CHILD"

// TestCrashSafety kills a process that appends concurrently with SIGKILL at
// random moments, 50 times, and checks after each restart that every append
// the child saw acknowledged is stored whole, that no append is stored in
// part, and that positions are still dense. Under the race detector it
// kills 10 (the detector watches the child's appenders as well in 10 as
// in 50, and each costs three times as long); make test runs the 50
// without it.
func TestCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("kills 50 child processes")
	}
	kills := 50
	if race.Enabled {
		kills = 10
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	var path string
	var acks []ack
	for round := range kills {
		if round%10 == 0 {
			// A new file now and then keeps each check short; every file
			// still goes through ten crashes and recoveries.
			path = filepath.Join(t.TempDir(), "crash.db")
			acks = nil
		}
		acks = append(acks, runAndKill(t, path, rng, round)...)
		checkAfterCrash(t, path, acks, round)
		if t.Failed() {
			return
		}
	}
}

// ack is one append the child reported as acknowledged.
type ack struct {
	stream      string
	first, last uint64
	position    uint64
	ids         []uuid.UUID
}

// runAndKill starts the child, lets it append for a random while, kills it
// and returns the appends it acknowledged before dying.
func runAndKill(t *testing.T, path string, rng *rand.Rand, round int) []ack {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path, "CAIRN_SQLITE_CRASH_SEED="+strconv.Itoa(round))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	ready := make(chan struct{})
	var acks []ack
	read := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 64<<10)
		readyOnce := sync.OnceFunc(func() { close(ready) })
		defer readyOnce()
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "ready":
				readyOnce()
			case strings.HasPrefix(line, "ack "):
				a, err := parseAck(line)
				if err != nil {
					read <- err
					return
				}
				acks = append(acks, a)
			}
		}
		read <- nil
	}()
	select {
	case <-ready:
	case <-time.After(time.Minute):
		t.Fatal("the child did not start appending within a minute")
	}
	time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	require.NoError(t, <-read, "round %d: child output", round)
	err = cmd.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "round %d: the child must die of the kill", round)
	require.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal(), "round %d: %v", round, err)
	return acks
}

func parseAck(line string) (ack, error) {
	f := strings.Fields(line)
	if len(f) < 6 {
		return ack{}, fmt.Errorf("short ack line %q", line)
	}
	a := ack{stream: f[1]}
	var err error
	nums := []*uint64{&a.first, &a.last, &a.position}
	for i, p := range nums {
		if *p, err = strconv.ParseUint(f[2+i], 10, 64); err != nil {
			return a, fmt.Errorf("ack line %q: %w", line, err)
		}
	}
	for _, s := range f[5:] {
		id, err := uuid.Parse(s)
		if err != nil {
			return a, fmt.Errorf("ack line %q: %w", line, err)
		}
		a.ids = append(a.ids, id)
	}
	return a, nil
}

// checkAfterCrash reopens the file and checks what a crash may not break.
func checkAfterCrash(t *testing.T, path string, acks []ack, round int) {
	t.Helper()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err, "round %d: reopen after the kill", round)
	defer s.Close()

	type stored struct {
		stream   string
		version  uint64
		position uint64
	}
	byID := make(map[uuid.UUID]stored)
	appends := make(map[string][]eventstore.Event) // by the append's tag
	var n uint64
	for e, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		require.NoError(t, err, "round %d", round)
		n++
		require.Equal(t, n, e.Position.Major, "round %d: positions are not dense", round)
		byID[e.ID] = stored{e.StreamID, e.Version, e.Position.Major}
		sum := sha256.Sum256(e.Data)
		require.Equal(t, hex.EncodeToString(sum[:8]), e.Metadata.Extra["sum"], "round %d: event %s data damaged", round, e.ID)
		tag := e.Metadata.Extra["append"]
		appends[tag] = append(appends[tag], e)
	}

	// No append is stored in part: each holds all its events, in order, at
	// consecutive versions of one stream.
	for tag, evs := range appends {
		size, err := strconv.Atoi(evs[0].Metadata.Extra["size"])
		require.NoError(t, err)
		require.Len(t, evs, size, "round %d: append %s is stored in part", round, tag)
		for i, e := range evs {
			assert.Equal(t, strconv.Itoa(i), e.Metadata.Extra["index"], "round %d: append %s", round, tag)
			assert.Equal(t, evs[0].StreamID, e.StreamID)
			assert.Equal(t, evs[0].Version+uint64(i), e.Version)
		}
	}

	// Every acknowledged append is there, where the child was told it is.
	for _, a := range acks {
		for i, id := range a.ids {
			got, ok := byID[id]
			require.True(t, ok, "round %d: acknowledged event %s of stream %s is lost", round, id, a.stream)
			assert.Equal(t, stored{a.stream, a.first + uint64(i), got.position}, got, "round %d", round)
		}
		assert.Equal(t, a.position, byID[a.ids[len(a.ids)-1]].position, "round %d: position of %s", round, a.stream)
	}

	// Each stream's versions are dense too.
	streams := make(map[string]uint64)
	for e, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		require.NoError(t, err)
		require.Equal(t, streams[e.StreamID], e.Version, "round %d: stream %s has a gap", round, e.StreamID)
		streams[e.StreamID]++
	}
	t.Logf("round %d: %d events, %d acknowledged appends checked", round, n, len(acks))
}

// TestHelperCrashChild is the appender that TestCrashSafety kills. It runs
// only when crashChildEnv is set.
func TestHelperCrashChild(t *testing.T) {
	path := os.Getenv(crashChildEnv)
	if path == "" {
		t.Skip("the child of TestCrashSafety")
	}
	seed, _ := strconv.Atoi(os.Getenv("CAIRN_SQLITE_CRASH_SEED"))
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: open:", err)
		os.Exit(2)
	}
	var mu sync.Mutex
	say := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		// One write per line: the parent sees whole lines or none.
		if _, err := os.Stdout.WriteString(line + "\n"); err != nil {
			os.Exit(3)
		}
	}
	say("ready")
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(seed), uint64(g)))
			for {
				stream := fmt.Sprintf("crash-%d", rng.IntN(12))
				evs := crashEvents(rng)
				r, err := s.Append(ctx, stream, eventstore.Any, evs...)
				if err != nil {
					fmt.Fprintln(os.Stderr, "child: append:", err)
					os.Exit(4)
				}
				line := fmt.Sprintf("ack %s %d %d %d", stream, r.FirstVersion, r.LastVersion, r.Position.Major)
				for _, e := range evs {
					line += " " + e.ID.String()
				}
				say(line)
			}
		}()
	}
	wg.Wait()
}

// crashEvents returns 1 to 8 events of random sizes, up to 64 KiB, tagged
// so that a check can tell whether the append is whole.
func crashEvents(rng *rand.Rand) []eventstore.EventData {
	n := 1 + rng.IntN(8)
	tag := uuid.NewString()
	evs := make([]eventstore.EventData, n)
	for i := range evs {
		size := rng.IntN(512)
		if rng.IntN(10) == 0 {
			size = rng.IntN(64 << 10)
		}
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		sum := sha256.Sum256(data)
		evs[i] = eventstore.EventData{
			ID:   uuid.New(),
			Type: "crash.test",
			Data: data,
			Metadata: eventstore.Metadata{Extra: map[string]string{
				"append": tag, "index": strconv.Itoa(i), "size": strconv.Itoa(n), "sum": hex.EncodeToString(sum[:8]),
			}},
		}
	}
	return evs
}
