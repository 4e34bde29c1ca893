package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
)

// bin holds the binaries that binaries builds, once, on the first test
// that needs them (so that a run of no test, as make bench's, builds
// nothing): the cairn binary, and the KurrentDB test server's
// (eventstore/kurrentdb/internal/testserver/serve), which this module
// cannot import, being outside the KurrentDB module. The tests run the
// server as a process of its own, so that the cairn binary speaks the
// KurrentDB protocol to it over gRPC as to a real server.
var bin struct {
	once             sync.Once
	dir              string
	cairn, kurrentdb string
	err              error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bin.dir != "" {
		_ = os.RemoveAll(bin.dir)
	}
	os.Exit(code)
}

func binaries(t *testing.T) {
	t.Helper()
	bin.once.Do(func() {
		if bin.dir, bin.err = os.MkdirTemp("", "cairn-bin-"); bin.err != nil {
			return
		}
		bin.cairn = filepath.Join(bin.dir, exe("cairn"))
		bin.kurrentdb = filepath.Join(bin.dir, exe("kurrentdb-testserver"))
		for _, b := range []struct{ dir, out, pkg string }{
			{".", bin.cairn, "."},
			{"../../eventstore/kurrentdb", bin.kurrentdb, "./internal/testserver/serve"},
		} {
			cmd := exec.Command("go", "build", "-o", b.out, b.pkg)
			cmd.Dir = b.dir
			if out, err := cmd.CombinedOutput(); err != nil {
				bin.err = fmt.Errorf("go build %s in %s: %w\n%s", b.pkg, b.dir, err, out)
				return
			}
		}
	})
	require.NoError(t, bin.err)
}

func exe(name string) string {
	if runtime.GOOS == "windows" {
		return name + ".exe"
	}
	return name
}

// result is what one run of the binary did.
type result struct {
	code           int
	stdout, stderr string
}

// cairn runs the binary on args, with no terminal on stdin.
func cairn(t *testing.T, args ...string) result {
	t.Helper()
	binaries(t)
	var out, errOut bytes.Buffer
	cmd := exec.Command(bin.cairn, args...)
	cmd.Stdin = strings.NewReader("")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.Env = append(os.Environ(), "CAIRN_STORE=")
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		require.NoError(t, err)
	}
	return result{cmd.ProcessState.ExitCode(), out.String(), errOut.String()}
}

// kurrentDB starts the KurrentDB test server for the test and returns its
// connection string; closing its stdin ends it.
func kurrentDB(t *testing.T) string {
	t.Helper()
	binaries(t)
	cmd := exec.Command(bin.kurrentdb)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	url, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return strings.TrimSpace(url)
}

// sqliteStore makes a SQLite store with a few events and returns its URL.
func sqliteStore(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "events.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	for i := range 6 {
		_, err := s.Append(ctx, fmt.Sprintf("order-%d", i%3), eventstore.Any,
			eventstore.EventData{Type: "order.noted", SchemaVersion: 1, Data: fmt.Appendf(nil, `{"n":%d}`, i)})
		require.NoError(t, err)
	}
	var fourth eventstore.Position
	for e, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		require.NoError(t, err)
		if e.Version == 1 && e.StreamID == "order-0" {
			fourth = e.Position
		}
	}
	require.NoError(t, s.SaveCheckpoint(ctx, "orders-view", eventstore.Start, fourth, 0))
	require.NoError(t, s.Close())
	return "sqlite://" + path
}

func TestHelp(t *testing.T) {
	r := cairn(t, "--help")
	require.Equal(t, 0, r.code, r.stderr)
	for _, cmd := range []string{"streams", "events", "copy"} {
		assert.Contains(t, r.stdout, cmd)
	}
	assert.Contains(t, r.stdout, "kurrentdb://")
}

func TestStreamsOnSQLite(t *testing.T) {
	r := cairn(t, "--store", sqliteStore(t), "streams", "ls")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "order-0")
	assert.Contains(t, r.stdout, "order-2")
}

// TestCopyThroughKurrentDB copies SQLite into KurrentDB with the
// consumers' state, lists the streams there, and copies it back into a
// new SQLite file.
func TestCopyThroughKurrentDB(t *testing.T) {
	from := sqliteStore(t)
	kdb := kurrentDB(t)
	r := cairn(t, "copy", "--from", from, "--to", kdb, "--consumers", "--yes")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^COPIED +6$`, r.stdout)
	assert.Regexp(t, `(?m)^CONSUMERS +1$`, r.stdout)
	assert.Contains(t, r.stdout, "0 differ")

	r = cairn(t, "--store", kdb, "streams", "ls", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var streams []struct {
		Stream string `json:"stream"`
		Events uint64 `json:"events"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &streams), r.stdout)
	require.Len(t, streams, 3)
	assert.Equal(t, "order-0", streams[0].Stream)
	assert.Equal(t, uint64(2), streams[0].Events)

	back := "sqlite://" + filepath.Join(t.TempDir(), "back.db")
	r = cairn(t, "copy", "--from", kdb, "--to", back, "--consumers", "--json", "--yes")
	require.Equal(t, 0, r.code, r.stderr)
	var rep struct {
		Copied    int64 `json:"copied"`
		Consumers int64 `json:"consumers"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	assert.Equal(t, int64(6), rep.Copied)
	assert.Equal(t, int64(1), rep.Consumers)
}

func TestBadKurrentDBURL(t *testing.T) {
	r := cairn(t, "--store", "kurrentdb://host:notaport/?tls=maybe", "streams", "ls")
	assert.Equal(t, 2, r.code, "a usage error: %s", r.stderr)
	assert.Contains(t, r.stderr, "KurrentDB connection string")
}
