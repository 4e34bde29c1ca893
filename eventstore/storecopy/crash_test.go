package storecopy_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/eventstore/storecopy"
)

// crashChildEnv switches the test binary into the copier that
// TestCopyKilled kills; its value is the source's path, a newline, the
// target's.
const crashChildEnv = "CAIRN_STORECOPY_CRASH_CHILD"

// TestCopyKilled copies one SQLite file into another in a child process,
// with the consumers' state, kills it with SIGKILL part-way a few times,
// then copies to the end and checks that the target holds every event
// exactly once, as the source, and every consumer's checkpoint at the
// target's copy of its event.
func TestCopyKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("kills child processes")
	}
	ctx := context.Background()
	dir := t.TempDir()
	srcPath, dstPath := filepath.Join(dir, "src.db"), filepath.Join(dir, "dst.db")
	src, err := sqlite.Open(ctx, srcPath, sqlite.Options{Synchronous: sqlite.SyncNormal})
	require.NoError(t, err)
	writeLog(t, src, 150)
	want := readAll(t, src)
	// Consumers spread over the log, so that kills land before, between
	// and after their events.
	consumers := map[string]eventstore.Event{}
	for i := 0; i < len(want); i += len(want) / 9 {
		name := fmt.Sprintf("consumer-%03d", i)
		consumers[name] = want[i]
		require.NoError(t, src.SaveCheckpoint(ctx, name, eventstore.Start, want[i].Position, 0))
	}
	require.NoError(t, src.Close())

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	killedPartWay := 0
	for round := range 4 {
		done := runCopyAndKill(t, srcPath, dstPath, 1+rng.IntN(4))
		n := countEvents(t, dstPath)
		t.Logf("round %d: the target holds %d of %d events (child finished: %v)", round, n, len(want), done)
		if !done && n > 0 && n < len(want) {
			killedPartWay++
		}
		if done {
			break
		}
	}
	require.Positive(t, killedPartWay, "no kill landed in the middle of the copy")

	src = openSQLite(t, srcPath)
	dst := openSQLite(t, dstPath)
	r, err := storecopy.Copy(ctx, src, dst, storecopy.Options{Consumers: true})
	require.NoError(t, err)
	assert.LessOrEqual(t, r.Duplicates, int64(maxRun), "at most the one append the kill left unrecorded")
	require.NotNil(t, r.Verification)
	assert.Empty(t, r.Verification.Mismatches)
	assert.Equal(t, 5, r.Verification.Streams)
	requireSameEvents(t, want, readAll(t, dst))
	for name, e := range consumers {
		cp, err := dst.Checkpoint(ctx, name)
		require.NoError(t, err)
		assert.Equal(t, targetPosition(t, dst, e.ID), cp.Position, name)
	}
}

// maxRun is the longest run of one stream in writeLog's log:
// at most that many events come back as duplicates after a kill.
const maxRun = 4

// runCopyAndKill starts the copying child and kills it after it reported
// progress reports times; done is true when it finished first.
func runCopyAndKill(t *testing.T, srcPath, dstPath string, reports int) (done bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperCopyChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+srcPath+"\n"+dstPath)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(out)
	seen := 0
	for seen < reports && sc.Scan() {
		switch line := sc.Text(); {
		case strings.HasPrefix(line, "progress "):
			seen++
		case line == "done":
			done = true
		}
	}
	if done {
		require.NoError(t, cmd.Wait())
		return true
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	for sc.Scan() {
		if sc.Text() == "done" {
			done = true
		}
	}
	err = cmd.Wait()
	if done {
		return true
	}
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the child must die of the kill")
	require.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal())
	return false
}

func countEvents(t *testing.T, path string) int {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	require.NoError(t, err)
	defer s.Close()
	return len(readAll(t, s))
}

// TestHelperCopyChild is the copier that TestCopyKilled kills. It runs only
// when crashChildEnv is set.
func TestHelperCopyChild(t *testing.T) {
	paths := strings.Split(os.Getenv(crashChildEnv), "\n")
	if len(paths) != 2 {
		t.Skip("the child of TestCopyKilled")
	}
	ctx := context.Background()
	open := func(path string) eventstore.Store {
		s, err := sqlite.Open(ctx, path, sqlite.Options{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "child: open:", err)
			os.Exit(2)
		}
		return s
	}
	src, dst := open(paths[0]), open(paths[1])
	_, err := storecopy.Copy(ctx, src, dst, storecopy.Options{NoVerify: true, Consumers: true, ProgressEvery: 20 * time.Millisecond,
		Progress: func(p storecopy.Progress) {
			// One write per line: the parent sees whole lines or none.
			_, _ = fmt.Fprintf(os.Stdout, "progress %d %d\n", p.Done, p.Total)
		}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: copy:", err)
		os.Exit(3)
	}
	_, _ = os.Stdout.WriteString("done\n")
}
