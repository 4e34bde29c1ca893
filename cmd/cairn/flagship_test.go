package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
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

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/testrig/pgtest"
)

// The flagship example's binary, built once beside the cairn binary: the
// tests run it as a person would, and it starts its sale process from it.
var example struct {
	once sync.Once
	path string
	err  error
}

func reservationBinary(t *testing.T) string {
	t.Helper()
	binaries(t)
	example.once.Do(func() {
		example.path = filepath.Join(bin.dir, exe("reservation"))
		// The example builds in the main module, whose go.sum holds what
		// it needs and this module's need not (the OpenTelemetry SDK and
		// exporters of its -trace).
		cmd := exec.Command("go", "build", "-o", example.path, "./examples/reservation")
		cmd.Dir = filepath.Join("..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			example.err = fmt.Errorf("go build the example: %w\n%s", err, out)
		}
	})
	require.NoError(t, example.err)
	return example.path
}

// everyOrderEnded is the line the example's summary ends with when its own
// check (every order ended as its inputs dictate, every command took
// effect once, the read models agree) passed.
const everyOrderEnded = "every order ended as its inputs dictate, and every command took effect once"

// runExample places orders with the example (its sale process killed once
// mid-way and restarted, as by default) on the store storeURL, or on the
// SQLite file in data when storeURL is "", and checks its summary.
func runExample(t *testing.T, data, storeURL string, orders int, seed uint64) {
	t.Helper()
	args := []string{"-data", data, "-orders", strconv.Itoa(orders), "-seed", strconv.FormatUint(seed, 10),
		"-clients", "8", "-workers", "8", "-pace", "1ms", "-payment-window", "1s"}
	if storeURL != "" {
		args = append(args, "-store", storeURL)
	}
	var out, errOut bytes.Buffer
	cmd := exec.Command(reservationBinary(t), args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Run(), "the example on %s:\n%s\n%s", orDefault(storeURL, data), out.String(), errOut.String())
	require.Contains(t, out.String(), everyOrderEnded, errOut.String())
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// admin runs the example's mounted command line (reservation admin).
func admin(t *testing.T, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.Command(reservationBinary(t), append([]string{"admin"}, args...)...)
	cmd.Stdin = strings.NewReader("")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		require.NoError(t, err)
	}
	return result{cmd.ProcessState.ExitCode(), out.String(), errOut.String()}
}

// flagshipSource makes the SQLite store of an existing installation of the
// example: two runs of it in one data folder. Its events cannot be padded
// with filler in a category of their own, as the example reads the whole
// log back with its codec and would refuse events it does not know; two
// runs of 300 orders make about 5,000 events, which a copy to PostgreSQL
// takes seconds over, appending them one by one (the streams interleave):
// long enough to be killed half-way.
func flagshipSource(t *testing.T) (data, storeURL string) {
	t.Helper()
	data = filepath.Join(t.TempDir(), "data")
	runExample(t, data, "", 300, 1)
	runExample(t, data, "", 300, 2)
	return data, "sqlite://" + filepath.Join(data, "reservation.db")
}

// pgStore names a new schema on server for a store, dropped at the test's
// end. search_path names it too: the example keeps its read models (the
// sales board, the not-reserved list) in unqualified tables, which
// PostgreSQL creates in the search path's first schema, public by default,
// where the stores of this test's two schemas would share them.
func pgStore(t *testing.T, server *pgtest.Server, prefix string) (storeURL, schema string) {
	t.Helper()
	schema = server.TempSchema(t, prefix)
	u, err := url.Parse(server.URL)
	require.NoError(t, err)
	q := u.Query()
	q.Set("schema", schema)
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), schema
}

// openPG opens the store in schema on server for the test to look at.
func openPG(t *testing.T, server *pgtest.Server, schema string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), server.URL, postgres.Options{Schema: schema})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestFlagshipToPostgres is issue 26's Done-when: an existing SQLite store
// of the flagship example is copied to PostgreSQL, the example runs on it
// and doctor reports it healthy; the same after a copy killed with SIGKILL
// half-way and run again.
func TestFlagshipToPostgres(t *testing.T) {
	server := pgtest.ForTest(t, pgtest.Options{})
	data, from := flagshipSource(t)
	total := streamCounts(t, from).events()

	t.Run("copy", func(t *testing.T) {
		to, _ := pgStore(t, server, "flagship")
		r := cairn(t, "copy", "--from", from, "--to", to, "--consumers", "--snapshots", "--yes")
		require.Equal(t, 0, r.code, r.stderr)
		assert.Regexp(t, fmt.Sprintf(`(?m)^COPIED +%d$`, total), r.stdout)
		assert.Regexp(t, `(?m)^DUPLICATES +0$`, r.stdout)
		assert.Contains(t, r.stdout, fmt.Sprintf("%d events, 0 differ", total))
		assert.Equal(t, streamCounts(t, from), streamCounts(t, to), "streams ls agrees on both stores")

		serveOn(t, data, to, 3)
		healthy(t, to)
	})

	t.Run("killed copy resumes", func(t *testing.T) {
		to, schema := pgStore(t, server, "flagship_killed")
		// Open the target before the copy does, so that its schema is made
		// once, and the test can count what the copy appended so far.
		target := openPG(t, server, schema)
		killed := killCopyHalfway(t, from, to, target, total)

		var rep struct {
			ResumedAfter eventstore.Position `json:"resumed_after"`
			Copied       int64               `json:"copied"`
			Duplicates   int64               `json:"duplicates"`
			Verification struct {
				Events     int64 `json:"events"`
				Mismatches []any `json:"mismatches"`
			} `json:"verification"`
		}
		r := cairn(t, "copy", "--from", from, "--to", to, "--consumers", "--snapshots", "--yes", "--json")
		require.Equal(t, 0, r.code, r.stderr)
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
		assert.NotEqual(t, eventstore.Start, rep.ResumedAfter, "the rerun resumed where the killed copy recorded its progress")
		// The server may still commit the append whose COMMIT the killed
		// copy had sent when the test counted, so the rest may be one
		// append less than counted; sameEvents checks the end exactly.
		assert.Positive(t, rep.Copied, "the rerun appended the rest")
		assert.LessOrEqual(t, rep.Copied, total-killed, "and only the rest")
		assert.LessOrEqual(t, rep.Duplicates, killed, "events found copied already were not appended again")
		assert.Equal(t, total, rep.Verification.Events)
		assert.Empty(t, rep.Verification.Mismatches)
		sameEvents(t, from, target)

		serveOn(t, data, to, 4)
		healthy(t, to)
	})
}

// killCopyHalfway starts the copy from source to target as a process of
// its own, kills it with SIGKILL once the target holds some but not all of
// the total events, and returns how many it holds then.
func killCopyHalfway(t *testing.T, from, to string, target *postgres.Store, total int64) int64 {
	t.Helper()
	binaries(t)
	var out, errOut bytes.Buffer
	cmd := exec.Command(bin.cairn, "copy", "--from", from, "--to", to, "--consumers", "--snapshots", "--yes")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	// A deadline for a stuck copy, not a measure of its speed.
	deadline := time.Now().Add(time.Minute)
	for {
		n := countEvents(t, target)
		if n >= total/3 && n < total {
			break
		}
		select {
		case err := <-exited:
			require.Failf(t, "the copy ended before it could be killed half-way",
				"%d of %d events copied, exit %v; make the source bigger\n%s\n%s", n, total, err, out.String(), errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited // so that its output is whole, and no longer written to
			require.Failf(t, "the copy did not get a third of the way in a minute", "%s", errOut.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	err := <-exited
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "killed, the copy does not exit on its own")
	status, ok := exit.Sys().(syscall.WaitStatus)
	require.True(t, ok)
	require.Equal(t, syscall.SIGKILL, status.Signal(), "the copy died of the SIGKILL, mid-way")

	n := countEvents(t, target)
	require.Positive(t, n)
	require.Less(t, n, total, "the killed copy left the rest to do")
	t.Logf("killed the copy with %d of %d events in the target", n, total)
	return n
}

// countEvents counts the events in s through its catalog, which answers
// from its index without reading the log.
func countEvents(t *testing.T, s storekit.Catalog) int64 {
	t.Helper()
	var n int64
	for st, err := range s.Streams(context.Background(), "", "") {
		require.NoError(t, err)
		n += int64(st.LastVersion) + 1
	}
	return n
}

// sameEvents checks that target holds the SQLite store from's events, in
// the same order, with the same streams, versions, IDs and types.
func sameEvents(t *testing.T, from string, target eventstore.Store) {
	t.Helper()
	ctx := context.Background()
	src, err := sqlite.Open(ctx, strings.TrimPrefix(from, "sqlite://"), sqlite.Options{ReadOnly: true})
	require.NoError(t, err)
	defer src.Close()
	type ev struct {
		ID, Stream, Type string
		Version          uint64
	}
	read := func(s eventstore.Store) []ev {
		var all []ev
		for e, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
			require.NoError(t, err)
			all = append(all, ev{e.ID.String(), e.StreamID, e.Type, e.Version})
		}
		return all
	}
	want, got := read(src), read(target)
	require.Equal(t, len(want), len(got), "as many events in both")
	for i := range want {
		require.Equal(t, want[i], got[i], "event %d of the log", i)
	}
}

// streams are a store's streams, as streams ls --json lists them, by
// name: how many events each holds.
type streams map[string]uint64

func (s streams) events() int64 {
	var n int64
	for _, e := range s {
		n += int64(e)
	}
	return n
}

func streamCounts(t *testing.T, storeURL string) streams {
	t.Helper()
	r := cairn(t, "--store", storeURL, "streams", "ls", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var list []struct {
		Stream string `json:"stream"`
		Events uint64 `json:"events"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list), r.stdout)
	s := streams{}
	for _, st := range list {
		s[st.Stream] = st.Events
	}
	return s
}

// serveOn runs the example on the copied store at storeURL, as the service
// moved to PostgreSQL would, and checks that it finds the history its
// SQLite runs saved and that its new orders end as they should.
func serveOn(t *testing.T, data, storeURL string, seed uint64) {
	t.Helper()
	// The example keeps its read models in tables of the store's
	// database, beside their checkpoints. The copy carried the
	// checkpoints (--consumers) but not the tables, which are the
	// service's, not the store's: without a reset, the projections would
	// go on from the copied checkpoints into empty tables. The operator
	// resets them to the start, and the service rebuilds them.
	for _, p := range []string{"not-reserved", "sales-board"} {
		r := cairn(t, "--store", storeURL, "projections", "reset", p, "--to-start", "--yes")
		require.Equal(t, 0, r.code, r.stderr)
	}
	// A data folder with the SQLite runs' saved history and no store: the
	// example reads the PostgreSQL store's history back and must find the
	// same as the SQLite runs saved.
	moved := filepath.Join(t.TempDir(), "moved")
	require.NoError(t, os.MkdirAll(moved, 0o755))
	saved, err := os.ReadFile(filepath.Join(data, "history.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(moved, "history.json"), saved, 0o644))
	runExample(t, moved, storeURL, 30, seed)
}

// doctorReport is what the tests read of doctor --json.
type doctorReport struct {
	Healthy   bool `json:"healthy"`
	Consumers []struct {
		Name       string              `json:"name"`
		Checkpoint eventstore.Position `json:"checkpoint"`
	} `json:"consumers"`
	Findings []struct {
		What  string `json:"what"`
		Where string `json:"where"`
	} `json:"findings"`
}

// healthy checks that doctor, of the bare binary and of the service's
// (which knows its projections' filters and adds the sale saga's own
// findings), finds nothing that needs attention in the store at storeURL.
func healthy(t *testing.T, storeURL string) {
	t.Helper()
	for _, d := range []struct {
		name string
		run  func(args ...string) result
	}{
		{"cairn", func(args ...string) result { return cairn(t, args...) }},
		{"reservation admin", func(args ...string) result { return admin(t, args...) }},
	} {
		r := d.run("--store", storeURL, "doctor", "--json")
		var rep doctorReport
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), "%s doctor: %s\n%s", d.name, r.stdout, r.stderr)
		assert.Empty(t, rep.Findings, "%s doctor finds a healthy store healthy", d.name)
		assert.True(t, rep.Healthy, "%s doctor", d.name)
		assert.Equal(t, 0, r.code, "%s doctor: %s", d.name, r.stderr)
	}
}
