package cli_test

import (
	"bytes"
	"context"
	"flag"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/cli"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/internal/testrig/clitest"
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

// golden compares got with testdata/<name>.golden, or writes it there
// with -update (see clitest.Golden).
func golden(t *testing.T, name, got string) {
	t.Helper()
	clitest.Golden(t, "testdata", name, got, *update)
}

// eventID makes the fixtures' event IDs the same on every run.
func eventID(n int) uuid.UUID { return clitest.EventID(n) }
