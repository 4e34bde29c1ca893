package cli_test

// Adversarial review of issue 26 (the cairn command line). Each
// TestReview... test states the promise it checks; those that fail at the
// time of the review are findings, the others pin behaviour that held.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/cli"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
)

// runNoPanic is run, with a panic of the command line turned into a test
// failure that names the command, so that the other cases still run.
func runNoPanic(t *testing.T, opts cli.Options, args ...string) (r result) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("cairn %q panicked: %v", args, p)
			r = result{code: -1}
		}
	}()
	return run(t, opts, "", args...)
}

// fixtureStore makes a SQLite store holding the fixture and returns its
// URL, closed.
func fixtureStore(t *testing.T) string {
	t.Helper()
	u, store := backends()[0].create(t)
	buildFixture(t, store)
	require.NoError(t, store.Close())
	return u
}

// Broken promise (docs/cli.md, "never a panic on user data"; exit code 2
// for a wrong command line): streams tail -n N with a huge N panics in
// tailStart (make([]Position, limit+1) overflows: "makeslice: len out of
// range"); a merely large one (-n 1000000000) allocates 16 GB before
// reading one event.
func TestReviewTailHugeLimitPanics(t *testing.T) {
	u := fixtureStore(t)
	r := runNoPanic(t, cli.Options{}, "--store", u, "streams", "tail", "-n", "9223372036854775807")
	if r.code != -1 {
		// No panic: it must print the whole log (8 events), as a
		// limit past the log's length does.
		assert.Equal(t, cli.ExitOK, r.code, r.stderr)
		assert.Equal(t, 9, strings.Count(r.stdout, "\n"), "the header and the 8 events:\n%s", r.stdout)
	}
}

// Broken promise (docs/cli.md exit codes): a negative count is a wrong
// command line (exit 2), not a silent "print nothing" (streams tail -n -5)
// or "print everything" (streams read --limit -1).
func TestReviewNegativeLimitIsUsage(t *testing.T) {
	u := fixtureStore(t)
	for _, args := range [][]string{
		{"streams", "tail", "-n", "-5"},
		{"streams", "read", "order-1", "--limit", "-1"},
		{"streams", "ls", "--limit", "-1"},
		{"events", "find", "--type", "order.placed", "--limit", "-1"},
	} {
		r := runNoPanic(t, cli.Options{}, append([]string{"--store", u}, args...)...)
		assert.Equal(t, cli.ExitUsage, r.code, "cairn %q: stdout %q stderr %q", args, r.stdout, r.stderr)
	}
}

// Broken promise (docs/cli.md: "unknown command or flag ... exit 2"): an
// unknown top-level command exits 1 (cobra's plain error, not a
// UsageError), and an unknown subcommand of a group (streams bogus) prints
// the group's help on stdout and exits 0, so a script's typo looks like
// success.
func TestReviewUnknownCommandExitCode(t *testing.T) {
	u := fixtureStore(t)
	for _, args := range [][]string{
		{"bogus"},
		{"streams", "bogus"},
		{"projections", "lss"},
		{"sagas", "deadletters", "bogus"},
	} {
		r := runNoPanic(t, cli.Options{}, append([]string{"--store", u}, args...)...)
		assert.Equal(t, cli.ExitUsage, r.code, "cairn %q: stdout %.80q stderr %q", args, r.stdout, r.stderr)
	}
	// With --json, a script must get the error object, not help text.
	r := runNoPanic(t, cli.Options{}, "--store", u, "--json", "streams", "bogus")
	var v struct {
		Error    string `json:"error"`
		ExitCode int    `json:"exit_code"`
	}
	assert.NoError(t, json.Unmarshal([]byte(r.stdout), &v), "stdout is not the JSON error object: %.120q", r.stdout)
}

// Broken promise (docs/cli.md: "passwords hidden"; redact's contract): a
// PostgreSQL URL's password is printed in clear, on stderr and in the
// --json error object, when the URL's scheme is mistyped or the URL does
// not parse (open and openPostgres quote the raw URL, and url.Parse's
// error quotes it too).
func TestReviewPasswordInURLErrors(t *testing.T) {
	const password = "s3cretpw"
	u := fixtureStore(t)
	cases := [][]string{
		{"--store", "postgress://alice:" + password + "@localhost:5432/db", "streams", "ls"},
		{"--store", "postgres://alice:" + password + "@localhost:notaport/db", "streams", "ls"},
		{"--store", "postgres://alice:" + password + "@local%zzhost/db", "--json", "streams", "ls"},
		{"copy", "--from", u, "--to", "postgress://alice:" + password + "@localhost/db", "--json", "--yes"},
		{"copy", "--from", "postgres://alice:" + password + "@localhost:notaport/db", "--to", u, "--yes"},
	}
	for _, args := range cases {
		r := runNoPanic(t, cli.Options{}, args...)
		assert.NotEqual(t, cli.ExitOK, r.code)
		assert.NotContains(t, r.stderr, password, "cairn %q: stderr", args)
		assert.NotContains(t, r.stdout, password, "cairn %q: stdout", args)
	}
}

// Broken promise (docs/cli.md: "off a terminal ... it changes nothing and
// exits 4"): copy without --yes exits 4, but it opened the target in
// Create mode before asking: a SQLite target file is created, and a
// PostgreSQL target's schema is created and migrated.
func TestReviewCopyNotConfirmedChangesNothing(t *testing.T) {
	from, _ := copySource(t)

	dir := t.TempDir()
	target := filepath.Join(dir, "new.db")
	r := run(t, cli.Options{}, "", "copy", "--from", from, "--to", "sqlite://"+target)
	require.Equal(t, cli.ExitNotConfirmed, r.code, r.stderr)
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	assert.Empty(t, names, "not confirmed, yet the target's folder holds files")

	schema := fmt.Sprintf("review_unconfirmed_%d", time.Now().UnixNano())
	pu, err := url.Parse(server.URL)
	require.NoError(t, err)
	q := pu.Query()
	q.Set("schema", schema)
	pu.RawQuery = q.Encode()
	db, err := sql.Open("pgx", server.URL)
	require.NoError(t, err)
	defer db.Close()
	t.Cleanup(func() { _, _ = db.Exec(`DROP SCHEMA IF EXISTS "` + schema + `" CASCADE`) })
	r = run(t, cli.Options{}, "", "copy", "--from", from, "--to", pu.String())
	require.Equal(t, cli.ExitNotConfirmed, r.code, r.stderr)
	var n int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1`, schema).Scan(&n))
	assert.Zero(t, n, "not confirmed, yet the target schema %q was created", schema)
}

// Broken promise (copy's help: "a store cannot be copied onto itself"; the
// source "is opened read-only"): the check compares the two URLs as
// strings, so the same SQLite file named sqlite:relative or
// sqlite://localhost/abs is copied onto itself, exit 0, and the copy's
// checkpoint (cairn-copy:...) is written into the source store.
func TestReviewCopyOntoItselfByAnotherURL(t *testing.T) {
	from, _ := copySource(t)
	path := strings.TrimPrefix(from, "sqlite://")
	for _, to := range []string{"sqlite://localhost" + path, "sqlite:" + filepath.Base(path)} {
		t.Run(to, func(t *testing.T) {
			if !strings.HasPrefix(to, "sqlite://") {
				t.Chdir(filepath.Dir(path))
			}
			r := run(t, cli.Options{}, "", "copy", "--from", from, "--to", to, "--yes", "--consumers")
			assert.Equal(t, cli.ExitUsage, r.code, "copying %s onto %s: stdout %s stderr %s", from, to, r.stdout, r.stderr)
			s, err := sqlite.Open(context.Background(), path, sqlite.Options{ReadOnly: true})
			require.NoError(t, err)
			defer s.Close()
			for c, err := range s.Consumers(context.Background()) {
				require.NoError(t, err)
				assert.False(t, strings.HasPrefix(c.Name, "cairn-copy:"), "the source now holds the copy's checkpoint %q", c.Name)
			}
		})
	}
}

// Broken promise (a missing argument is a usage mistake, exit 2): streams
// tail "" takes the empty stream name as "no stream" and prints the last
// events of the whole log, exit 0, where streams read "" refuses the name.
func TestReviewTailEmptyStreamName(t *testing.T) {
	u := fixtureStore(t)
	r := runNoPanic(t, cli.Options{}, "--store", u, "streams", "tail", "")
	assert.NotEqual(t, cli.ExitOK, r.code, "stdout:\n%s", r.stdout)
	assert.NotContains(t, r.stdout, "order-2", "events of other streams printed for stream \"\"")
}

// Held: the bare reading commands leave a SQLite store's file and its -wal
// file as they were (bytes and modification time), and create no file.
func TestReviewBareReadsLeaveSQLiteUnchanged(t *testing.T) {
	u := fixtureStore(t)
	path := strings.TrimPrefix(u, "sqlite://")
	dir := filepath.Dir(path)
	state := func() string {
		ents, err := os.ReadDir(dir)
		require.NoError(t, err)
		var b strings.Builder
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), "-shm") {
				continue // shared memory: readers mark it, it holds no data
			}
			fi, err := os.Stat(filepath.Join(dir, e.Name()))
			require.NoError(t, err)
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			require.NoError(t, err)
			fmt.Fprintf(&b, "%s %d %d %x\n", e.Name(), fi.Size(), fi.ModTime().UnixNano(), sha256.Sum256(data))
		}
		return b.String()
	}
	before := state()
	for _, args := range [][]string{
		{"streams", "ls"}, {"streams", "ls", "--type", "order.paid"}, {"streams", "read", "order-1", "--data"},
		{"streams", "tail", "-n", "3"}, {"events", "find", "--correlation", "flow-1"}, {"projections", "ls"},
		{"projections", "status", "nobody"}, {"deadletters", "ls"}, {"sagas", "ls"}, {"sagas", "ls", "sale"},
		{"doctor", "--json"},
	} {
		r := runNoPanic(t, cli.Options{}, append([]string{"--store", u}, args...)...)
		assert.NotEqual(t, -1, r.code)
		assert.Equal(t, before, state(), "cairn %q changed the store's files", args)
	}
}

// Held: a newer schema is refused with both versions (exit 1); a file that
// is not a store is exit 2; a reading command names no missing file into
// existence.
func TestReviewRefusedFiles(t *testing.T) {
	u := fixtureStore(t)
	path := strings.TrimPrefix(u, "sqlite://")
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO cairn_schema(version, note, applied_at) VALUES (999, 'from the future', 0)`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	r := run(t, cli.Options{}, "", "--store", u, "streams", "ls")
	assert.Equal(t, cli.ExitFailed, r.code)
	assert.Contains(t, r.stderr, "999")

	other := filepath.Join(t.TempDir(), "x.db")
	require.NoError(t, os.WriteFile(other, []byte("not a store"), 0o644))
	r = run(t, cli.Options{}, "", "--store", "sqlite://"+other, "projections", "reset", "x", "--to-start", "--yes")
	assert.Equal(t, cli.ExitUsage, r.code, r.stderr)

	missing := filepath.Join(t.TempDir(), "missing.db")
	r = run(t, cli.Options{}, "", "--store", "sqlite://"+missing, "doctor")
	assert.Equal(t, cli.ExitUsage, r.code, r.stderr)
	_, err = os.Stat(missing)
	assert.True(t, os.IsNotExist(err))
}

// Held: tail of a stream whose name prefixes another's prints only its own
// events, the right count of them; a follow ends with exit 0 when its
// context ends.
func TestReviewTailPrefixStreamsAndFollow(t *testing.T) {
	u, store := backends()[0].create(t)
	ctx := context.Background()
	for i, s := range []string{"order-1", "order-1", "order-1", "order-10", "order-10", "order-10", "order-1x"} {
		_, err := store.Append(ctx, s, eventstore.Any, eventstore.EventData{ID: eventID(i), Type: "t", Data: []byte(`{}`)})
		require.NoError(t, err)
	}
	require.NoError(t, store.Close())
	r := run(t, cli.Options{}, "", "--store", u, "--json", "streams", "tail", "order-1", "-n", "2")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 2, r.stdout)
	for _, l := range lines {
		var e struct{ Stream string }
		require.NoError(t, json.Unmarshal([]byte(l), &e))
		assert.Equal(t, "order-1", e.Stream)
	}

	fctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	var out, errOut lockedBuffer
	code := cli.Main(fctx, []string{"--store", u, "streams", "tail", "order-1", "-f", "--json"}, cli.Options{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut})
	assert.Equal(t, cli.ExitOK, code, errOut.String())
	assert.Equal(t, 3, strings.Count(out.String(), "\n"))
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
