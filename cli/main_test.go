package cli_test

import (
	"bytes"
	"context"
	"flag"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/cli"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/internal/testrig/pgtest"
)

// server is the PostgreSQL server of this test binary; each store lives in
// a schema of its own on it.
var server *pgtest.Server

// update rewrites the golden files with what the commands print now:
// go test ./cli/ -run TestGolden -update, then read the diff.
var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func TestMain(m *testing.M) {
	os.Exit(pgtest.Main(m, pgtest.Options{}, &server))
}

// backend is a kind of store the golden tests run every command on: the
// same command line gives the same output (after normalize) on each.
type backend struct {
	name string
	// create makes an empty store and returns its URL for --store, and
	// the store, open, to build the fixture through.
	create func(t *testing.T) (string, eventstore.Store)
}

func backends() []backend {
	return []backend{
		{"sqlite", func(t *testing.T) (string, eventstore.Store) {
			path := filepath.Join(t.TempDir(), "events.db")
			s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
			require.NoError(t, err)
			return "sqlite://" + path, s
		}},
		{"postgres", func(t *testing.T) (string, eventstore.Store) {
			schema := server.TempSchema(t, "cli")
			s, err := postgres.Open(context.Background(), server.URL, postgres.Options{Schema: schema})
			require.NoError(t, err)
			u, err := url.Parse(server.URL)
			require.NoError(t, err)
			q := u.Query()
			q.Set("schema", schema)
			u.RawQuery = q.Encode()
			return u.String(), s
		}},
	}
}

// result is what one run of the command line did.
type result struct {
	code           int
	stdout, stderr string
}

// run runs the command line in-process on args, with stdin as the
// person's (or the pipe's) input, and the given options.
func run(t *testing.T, opts cli.Options, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	opts.Stdin = strings.NewReader(stdin)
	opts.Stdout, opts.Stderr = &out, &errOut
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := cli.Main(ctx, args, opts)
	return result{code, out.String(), errOut.String()}
}

// normalizations make output that differs between runs and stores (times,
// positions, IDs, paths, a schema's random name) comparable. Runs of
// spaces shrink to two, so that a column widened by a longer position on
// one store still compares.
var normalizations = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`), "<TIME>"},
	{regexp.MustCompile(`"\d+:\d+"`), `"<POS>"`},
	{regexp.MustCompile(`\b\d+:\d+\b`), "<POS>"},
	{regexp.MustCompile(`[0-9A-HJKMNP-TV-Z]{26}`), "<ULID>"},
	{regexp.MustCompile(`(sqlite://|postgres://)\S*`), "<STORE>"},
	{regexp.MustCompile(`\b\d+(\.\d+)?(ns|µs|ms|s|m|h)\b`), "<DURATION>"},
	// doctor names the store and its schema version (checked by
	// TestSagasDoctorNamesStore), a rebuild its rate, ls a time lag.
	{regexp.MustCompile(`(sqlite|postgres), schema version \d+`), "<KIND>, schema version <N>"},
	{regexp.MustCompile(`"store": "(sqlite|postgres)"`), `"store": "<KIND>"`},
	{regexp.MustCompile(`"schema_version": \d+`), `"schema_version": <N>`},
	{regexp.MustCompile(`\d+ events/s`), "<RATE> events/s"},
	{regexp.MustCompile(`"rate": [0-9.e+-]+`), `"rate": <RATE>`},
	{regexp.MustCompile(`"time_lag_seconds": [0-9.e+-]+`), `"time_lag_seconds": <SECONDS>`},
	{regexp.MustCompile(` {2,}`), "  "},
	{regexp.MustCompile(` +\n`), "\n"},
}

func normalize(s string) string {
	for _, n := range normalizations {
		s = n.re.ReplaceAllString(s, n.with)
	}
	return s
}

// golden compares got, normalized, with testdata/<name>.golden, or writes
// it there with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	got = normalize(got)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "no golden file: run go test ./cli/ -run %s -update", t.Name())
	require.Equal(t, string(want), got, "output of %s differs from %s (-update rewrites it)", t.Name(), path)
}

// eventID makes the fixture's event IDs the same on every run.
func eventID(n int) uuid.UUID {
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte{byte(n >> 8), byte(n)})
}
