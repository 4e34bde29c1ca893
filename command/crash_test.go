package command_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
	"github.com/cairn-es/cairn/command/commandtest"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/sqlite"
)

// The crash test: a child process dispatches the commands of a file, as a
// queue consumer would, acknowledging each one after its dispatch returns,
// and is killed with SIGKILL at random moments. A restarted child
// dispatches every unacknowledged command again (so the ones that were done
// but not acknowledged come back, as a queue redelivers them), and a random
// tenth of the acknowledged ones too. After every kill/restart cycle and a
// last run to the end, each command's effect must be in the store exactly
// once.
const (
	crashChildEnv   = "CAIRN_COMMAND_CRASH_CHILD"
	crashCycles     = 50
	crashCommands   = 1000
	crashAggregates = 8
	crashWorkers    = 4
	// maxRedeliveries bounds how often a child redispatches a command whose
	// conflicts outlasted the bus's retries, as a queue would redeliver it.
	maxRedeliveries = 100
)

type crashCommand struct {
	id, aggregate string
	twice         bool // IncrementTwice (two events in one append) or Increment
	by            int
}

func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("kills child processes; skipped in -short mode")
	}
	dir := t.TempDir()
	db, cmdFile, ackFile := filepath.Join(dir, "events.db"), filepath.Join(dir, "commands.tsv"), filepath.Join(dir, "acks")
	cmds := writeCrashCommands(t, cmdFile)

	run := func(kill time.Duration) (killed bool) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelperProcess$", "-test.v")
		cmd.Env = append(os.Environ(), crashChildEnv+"=1", "CAIRN_CRASH_DB="+db, "CAIRN_CRASH_COMMANDS="+cmdFile, "CAIRN_CRASH_ACKS="+ackFile)
		if kill > 0 {
			// A child that finishes its work waits to be killed, so that
			// every such cycle kills a live process, however fast the machine
			// (without the race detector the work often took less than the
			// kill window, and the cycle killed nothing).
			cmd.Env = append(cmd.Env, "CAIRN_CRASH_LINGER=1")
		}
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		require.NoError(t, cmd.Start())
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		if kill > 0 {
			select {
			case err := <-done:
				require.NoError(t, err, "child ended before it was killed:\n%s", out.String())
				return false
			case <-time.After(kill):
			}
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			err := <-done
			if err == nil {
				return false // it finished between the timer and the signal
			}
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "child output:\n%s", out.String())
			return true
		}
		require.NoError(t, <-done, "child output:\n%s", out.String())
		return false
	}

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	kills, midWork, acked := 0, 0, 0
	for cycle := range crashCycles {
		// The child's start-up is part of the window, so that some kills
		// land while it opens the store and most while it writes. The first
		// cycles are short, so that even a fast disk is interrupted while
		// new commands remain.
		window := 300
		if cycle < 10 {
			window = 50
		}
		if !run(time.Duration(rng.IntN(window)+10) * time.Millisecond) {
			continue // not killed: it ended first
		}
		kills++
		if n := len(readAcks(t, ackFile)); n > acked && n < crashCommands {
			midWork++
			acked = n
		}
	}
	// A machine slowed down (the race detector, a loaded CI runner) can
	// take longer than those windows to start the child: wider windows,
	// until a kill lands while it works, or the work is done.
	if len(readAcks(t, ackFile)) == crashCommands {
		acked = crashCommands
	}
	for extra := 1; midWork == 0 && acked < crashCommands && extra <= crashCycles; extra++ {
		if !run(time.Duration(rng.IntN(300*(1+extra/5))+10) * time.Millisecond) {
			continue
		}
		kills++
		if n := len(readAcks(t, ackFile)); n > acked && n < crashCommands {
			midWork++
			acked = n
		} else if n == crashCommands {
			acked = n
		}
	}
	run(0)
	t.Logf("%d of %d cycles killed the child, %d of them while it was working through new commands", kills, crashCycles, midWork)
	require.Greater(t, kills, crashCycles/2, "most cycles must kill a working child")
	require.GreaterOrEqual(t, midWork, 1, "kills must land while the child dispatches new commands")
	require.Len(t, readAcks(t, ackFile), crashCommands, "the last run acknowledges every command")
	verifyCrashStore(t, db, cmds)
}

// TestTwoProcesses runs two children at once on one SQLite file, both
// dispatching the same commands, one from the first and one from the last,
// with caches that the other process makes stale: they conflict where they
// meet, and every command must take effect once.
func TestTwoProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes; skipped in -short mode")
	}
	const limit = 200
	dir := t.TempDir()
	db, cmdFile := filepath.Join(dir, "events.db"), filepath.Join(dir, "commands.tsv")
	cmds := writeCrashCommands(t, cmdFile)[:limit]
	// Create the file first, so that the two children do not race to make
	// its schema.
	s, err := sqlite.Open(context.Background(), db, sqlite.Options{})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	gate := filepath.Join(dir, "gate")
	var procs []*exec.Cmd
	var outs []*strings.Builder
	for i := range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelperProcess$", "-test.v")
		cmd.Env = append(os.Environ(), crashChildEnv+"=1", "CAIRN_CRASH_DB="+db, "CAIRN_CRASH_COMMANDS="+cmdFile,
			"CAIRN_CRASH_ACKS="+filepath.Join(dir, fmt.Sprint("acks", i)), fmt.Sprint("CAIRN_CRASH_LIMIT=", limit),
			"CAIRN_CRASH_GATE="+gate, fmt.Sprint("CAIRN_CRASH_REVERSE=", i))
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		require.NoError(t, cmd.Start())
		procs, outs = append(procs, cmd), append(outs, out)
	}
	for {
		ready, err := filepath.Glob(gate + ".ready.*")
		require.NoError(t, err)
		if len(ready) == len(procs) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	for i, p := range procs {
		require.NoError(t, p.Wait(), "child %d output:\n%s", i, outs[i].String())
	}
	for i := range procs {
		for _, line := range strings.Split(outs[i].String(), "\n") {
			if strings.HasPrefix(line, "STATS") {
				t.Logf("child %d: %s", i, line)
			}
		}
		assert.Len(t, readAcks(t, filepath.Join(dir, fmt.Sprint("acks", i))), limit, "child %d acknowledges every command", i)
	}
	verifyCrashStore(t, db, cmds)
}

func writeCrashCommands(t *testing.T, path string) []crashCommand {
	t.Helper()
	var b strings.Builder
	cmds := make([]crashCommand, crashCommands)
	for i := range cmds {
		c := crashCommand{id: fmt.Sprintf("msg-%04d", i), aggregate: fmt.Sprint("agg", i%crashAggregates), twice: i%5 == 0, by: 1 + i%7}
		if c.twice {
			c.by = 1
		}
		cmds[i] = c
		fmt.Fprintf(&b, "%s\t%s\t%t\t%d\n", c.id, c.aggregate, c.twice, c.by)
	}
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	return cmds
}

func readCrashCommands(path string) ([]crashCommand, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var cmds []crashCommand
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) != 4 {
			return nil, fmt.Errorf("bad command line %q", sc.Text())
		}
		by, err := strconv.Atoi(fields[3])
		if err != nil {
			return nil, err
		}
		cmds = append(cmds, crashCommand{id: fields[0], aggregate: fields[1], twice: fields[2] == "true", by: by})
	}
	return cmds, sc.Err()
}

// readAcks returns the acknowledged command IDs.
func readAcks(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	acks := make(map[string]bool)
	for _, line := range strings.Split(string(data), "\n") {
		if line != "" {
			acks[line] = true
		}
	}
	return acks
}

func crashRegistry() (*codec.Registry, error) {
	reg := codec.NewRegistry(codec.Options{})
	if err := codec.Register[commandtest.Incremented](reg, "counter.incremented", 1); err != nil {
		return nil, err
	}
	if err := codec.Register[commandtest.Counter](reg, "counter.state", 2); err != nil {
		return nil, err
	}
	// The counter applies these too, so its repository needs them known,
	// though these tests never store one.
	if err := errors.Join(
		codec.Register[commandtest.Stamped](reg, "counter.stamped", 1),
		codec.Register[commandtest.Echoed](reg, "counter.echoed", 1),
		codec.Register[commandtest.Bomb](reg, "counter.bomb", 1),
	); err != nil {
		return nil, err
	}
	return reg, reg.Validate()
}

// TestCrashHelperProcess is the child of TestCrashRecovery; it does nothing
// in a normal test run.
func TestCrashHelperProcess(t *testing.T) {
	if os.Getenv(crashChildEnv) != "1" {
		t.Skip("child process of TestCrashRecovery")
	}
	ctx := context.Background()
	store, err := sqlite.Open(ctx, os.Getenv("CAIRN_CRASH_DB"), sqlite.Options{})
	require.NoError(t, err)
	defer store.Close()
	cmds, err := readCrashCommands(os.Getenv("CAIRN_CRASH_COMMANDS"))
	require.NoError(t, err)
	if limit, err := strconv.Atoi(os.Getenv("CAIRN_CRASH_LIMIT")); err == nil && limit < len(cmds) {
		cmds = cmds[:limit]
	}
	reg, err := crashRegistry()
	require.NoError(t, err)
	typ, err := aggregate.NewType[commandtest.Counter]("counter", aggregate.Options[commandtest.Counter]{SnapshotEvery: 10}, commandtest.CounterBindings()...)
	require.NoError(t, err)
	bus := command.New(store, reg, command.Options{Snapshots: memory.New()})
	require.NoError(t, command.Route[commandtest.Increment](bus, typ))
	require.NoError(t, command.Route[commandtest.IncrementTwice](bus, typ))

	acked := readAcks(t, os.Getenv("CAIRN_CRASH_ACKS"))
	acks, err := os.OpenFile(os.Getenv("CAIRN_CRASH_ACKS"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	require.NoError(t, err)
	defer acks.Close()
	if gate := os.Getenv("CAIRN_CRASH_GATE"); gate != "" {
		// Set up, then start together with the other child.
		require.NoError(t, os.WriteFile(fmt.Sprintf("%s.ready.%d", gate, os.Getpid()), nil, 0o600))
		for {
			if _, err := os.Stat(gate); err == nil {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	var todo []crashCommand
	for _, c := range cmds {
		if !acked[c.id] || rand.IntN(10) == 0 {
			todo = append(todo, c)
		}
	}
	if os.Getenv("CAIRN_CRASH_REVERSE") == "1" {
		slices.Reverse(todo)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	duplicates, retries, redelivered := 0, 0, 0
	start := time.Now()
	var first time.Duration
	defer func() {
		fmt.Printf("STATS dispatched=%d duplicates=%d retries=%d redelivered=%d first=%s all=%s\n",
			len(todo), duplicates, retries, redelivered, first, time.Since(start))
	}()
	for w := range crashWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(todo); i += crashWorkers {
				c := todo[i]
				var cmd command.Command = commandtest.Increment{ID: c.aggregate, By: c.by}
				if c.twice {
					cmd = commandtest.IncrementTwice{ID: c.aggregate}
				}
				res, err := bus.Dispatch(ctx, command.Message{ID: c.id, Command: cmd})
				// A conflict that outlasts the bus's bounded retries (the other
				// process keeps winning) is what a queue redelivers.
				for redelivery := 1; errors.Is(err, eventstore.ErrWrongVersion) && redelivery <= maxRedeliveries; redelivery++ {
					mu.Lock()
					redelivered++
					mu.Unlock()
					res, err = bus.Dispatch(ctx, command.Message{ID: c.id, Command: cmd})
				}
				if !assert.NoError(t, err, "command %s", c.id) {
					return
				}
				mu.Lock()
				if res.Duplicate {
					duplicates++
				}
				if first == 0 {
					first = time.Since(start)
				}
				retries += res.Attempts - 1
				_, err = acks.WriteString(c.id + "\n")
				mu.Unlock()
				if !assert.NoError(t, err) {
					return
				}
			}
		}()
	}
	wg.Wait()
	if os.Getenv("CAIRN_CRASH_LINGER") == "1" && !t.Failed() {
		fmt.Println("DONE; waiting to be killed")
		select {}
	}
}

func verifyCrashStore(t *testing.T, db string, cmds []crashCommand) {
	t.Helper()
	store, err := sqlite.Open(context.Background(), db, sqlite.Options{})
	require.NoError(t, err)
	defer store.Close()
	want := make(map[string]crashCommand, len(cmds))
	sums := make(map[string]int)
	for _, c := range cmds {
		want[c.id] = c
		if c.twice {
			sums[c.aggregate] += 2
		} else {
			sums[c.aggregate] += c.by
		}
	}
	got := make(map[string][]uint64)
	reg, err := crashRegistry()
	require.NoError(t, err)
	for agg, sum := range sums {
		stream := "counter-" + agg
		total := 0
		for e, err := range store.ReadStream(context.Background(), stream, eventstore.Forward(0)) {
			require.NoError(t, err)
			got[e.Metadata.CommandID] = append(got[e.Metadata.CommandID], e.Version)
			c, ok := want[e.Metadata.CommandID]
			require.True(t, ok, "event %d of %s has unknown command ID %q", e.Version, stream, e.Metadata.CommandID)
			require.Equal(t, c.aggregate, agg)
			vals, err := reg.Decode(e)
			require.NoError(t, err)
			total += vals[0].Value.(commandtest.Incremented).By
		}
		assert.Equal(t, sum, total, "the sum of %s's increments", stream)
	}
	for _, c := range cmds {
		versions := got[c.id]
		n := 1
		if c.twice {
			n = 2
		}
		if assert.Len(t, versions, n, "events of command %s", c.id) && n == 2 {
			assert.Equal(t, versions[0]+1, versions[1], "the two events of %s are one append", c.id)
		}
	}
}
