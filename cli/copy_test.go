package cli_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/cli"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/testrig/clitest"
)

// progressLine is a progress report of copy off a terminal: how many
// appear depends on the machine's speed, so the golden files go without.
var progressLine = regexp.MustCompile(`(?m)^copy: \d+(/\d+)? events.*\n`)

// copySource makes a SQLite store with the fixture and a consumer's
// checkpoint, and returns its URL and events.
func copySource(t *testing.T) (string, []eventstore.Event) {
	t.Helper()
	url, store := backends()[0].create(t)
	stored := buildFixture(t, store)
	require.NoError(t, store.(storekit.CheckpointStore).SaveCheckpoint(context.Background(), "projector", eventstore.Start, stored[4].Position, 0))
	require.NoError(t, store.Close())
	return url, stored
}

// TestGoldenCopy copies SQLite into PostgreSQL, again (resuming: nothing
// left), without --yes, into a target that conflicts, and with a flag
// missing.
func TestGoldenCopy(t *testing.T) {
	from, _ := copySource(t)
	to, target := backends()[1].create(t)
	require.NoError(t, target.Close())
	// A target whose stream order-2 holds another event.
	conflictPath := filepath.Join(t.TempDir(), "other.db")
	s, err := sqlite.Open(context.Background(), conflictPath, sqlite.Options{})
	require.NoError(t, err)
	_, err = s.Append(context.Background(), "order-2", eventstore.NoStream, eventstore.EventData{ID: eventID(1000), Type: "other", Data: []byte(`{}`)})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	conflicting := "sqlite://" + conflictPath

	// A target that holds one more event in order-1 than the source, after
	// a first copy: the rerun's verification finds it.
	mismatchPath := filepath.Join(t.TempDir(), "mismatch.db")
	mismatching := "sqlite://" + mismatchPath
	require.Equal(t, cli.ExitOK, run(t, cli.Options{}, "", "copy", "--from", from, "--to", mismatching, "--yes").code)
	s, err = sqlite.Open(context.Background(), mismatchPath, sqlite.Options{})
	require.NoError(t, err)
	_, err = s.Append(context.Background(), "order-1", eventstore.Exact(2), eventstore.EventData{ID: eventID(1001), Type: "extra", Data: []byte(`{}`)})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	cases := []struct {
		name string
		args []string
	}{
		{"copy", []string{"copy", "--from", from, "--to", to, "--consumers", "--snapshots", "--yes"}},
		{"copy-rerun", []string{"copy", "--from", from, "--to", to, "--consumers", "--yes"}},
		{"copy-not-confirmed", []string{"copy", "--from", from, "--to", to}},
		{"copy-conflict", []string{"copy", "--from", from, "--to", conflicting, "--yes"}},
		{"copy-mismatch", []string{"copy", "--from", from, "--to", mismatching, "--yes"}},
		{"copy-no-to", []string{"copy", "--from", from}},
		{"copy-same", []string{"copy", "--from", from, "--to", from}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// --store is not used by copy: a wrong one changes nothing.
			r := run(t, cli.Options{}, "", append([]string{"--store", "nowhere:x"}, tc.args...)...)
			stderr := progressLine.ReplaceAllString(r.stderr, "")
			golden(t, tc.name, clitest.Output(r.stdout, stderr, r.code))
		})
	}
}

// TestCopyJSON parses copy's --json back: the field names scripts rely on.
func TestCopyJSON(t *testing.T) {
	from, stored := copySource(t)
	toPath := filepath.Join(t.TempDir(), "copy.db")
	to := "sqlite://" + toPath

	r := run(t, cli.Options{}, "", "copy", "--from", from, "--to", to, "--consumers", "--no-verify", "--json", "--yes")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	assert.NotContains(t, r.stderr, "events/s", "no progress with --json")
	var rep struct {
		From         string  `json:"from"`
		To           string  `json:"to"`
		Checkpoint   string  `json:"checkpoint"`
		ResumedAfter string  `json:"resumed_after"`
		Last         string  `json:"last"`
		Copied       int64   `json:"copied"`
		Duplicates   int64   `json:"duplicates"`
		Appends      int64   `json:"appends"`
		Consumers    int64   `json:"consumers"`
		DeadLetters  int64   `json:"dead_letters"`
		Snapshots    int64   `json:"snapshots"`
		Elapsed      float64 `json:"elapsed_seconds"`
		Verification *struct {
			Streams int `json:"streams"`
		} `json:"verification"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	assert.Equal(t, from, rep.From)
	assert.Equal(t, to, rep.To)
	assert.Contains(t, rep.Checkpoint, "cairn-copy:")
	assert.Equal(t, "0:0", rep.ResumedAfter)
	assert.Equal(t, stored[len(stored)-1].Position.String(), rep.Last)
	assert.Equal(t, int64(len(stored)), rep.Copied)
	assert.Equal(t, int64(1), rep.Consumers)
	assert.Nil(t, rep.Verification)

	// The consumer resumes on the target after the same event.
	s, err := sqlite.Open(context.Background(), toPath, sqlite.Options{})
	require.NoError(t, err)
	defer s.Close()
	cp, err := s.Checkpoint(context.Background(), "projector")
	require.NoError(t, err)
	var at eventstore.Event
	for e, err := range s.ReadAll(context.Background(), eventstore.Start, eventstore.Filter{}) {
		require.NoError(t, err)
		if e.Position == cp.Position {
			at = e
		}
	}
	assert.Equal(t, stored[4].ID, at.ID)

	// A failure is one JSON object, with the exit code.
	r = run(t, cli.Options{}, "", "copy", "--from", from, "--json", "--yes")
	require.Equal(t, cli.ExitUsage, r.code)
	var failure struct {
		Error    string `json:"error"`
		ExitCode int    `json:"exit_code"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &failure))
	assert.Contains(t, failure.Error, "--to")
}

// TestCopyRedactsPasswords keeps a password of a store URL out of what
// copy prints.
func TestCopyRedactsPasswords(t *testing.T) {
	from, _ := copySource(t)
	r := run(t, cli.Options{}, "", "copy", "--from", from, "--to", "postgres://user:secret@127.0.0.1:1/db?connect_timeout=1", "--yes")
	assert.Equal(t, cli.ExitFailed, r.code)
	assert.NotContains(t, r.stdout+r.stderr, "secret")
}
