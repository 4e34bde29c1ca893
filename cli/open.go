package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/internal/redact"
	"github.com/jackc/pgx/v5"
)

// Mode says what a command will do with the store it opens.
type Mode int

const (
	// ReadOnly: the command only reads. Stores that can open read-only do
	// (SQLite opens the file read-only, PostgreSQL in read-only
	// transactions), so that a look can never change anything.
	ReadOnly Mode = iota
	// ReadWrite: the command changes the state of an existing store.
	ReadWrite
	// Create: the command writes, and may create the store (the target of
	// a copy).
	Create
)

// Opener opens the store a URL names, in mode. A URL it cannot parse, or
// a store that does not exist when mode is not Create, is a
// [*UsageError]; an error from the store is returned as it is.
type Opener func(ctx context.Context, url string, mode Mode) (eventstore.Store, error)

// open opens the store rawURL names, with the opener of its scheme. What
// it says of the URL, and what the opener's errors say, show it with its
// passwords masked: a mistyped URL must not put a password in a terminal's
// scrollback or a script's log.
func open(ctx context.Context, rawURL string, mode Mode, extra map[string]Opener) (eventstore.Store, error) {
	shown := redact.ConnString(rawURL)
	scheme, _, ok := strings.Cut(rawURL, ":")
	if !ok || scheme == "" {
		return nil, usagef("store URL %q has no scheme: write sqlite:///path/to/events.db, postgres://host/db or kurrentdb://host:2113", shown)
	}
	scheme = strings.ToLower(scheme)
	openers := map[string]Opener{"sqlite": openSQLite, "postgres": openPostgres, "postgresql": openPostgres}
	for k, o := range extra {
		openers[strings.ToLower(k)] = o
	}
	o, ok := openers[scheme]
	if !ok {
		known := make([]string, 0, len(openers))
		for k := range openers {
			known = append(known, k)
		}
		return nil, usagef("store URL %q: no store opens the scheme %q here (this binary knows %s)", shown, scheme, strings.Join(sorted(known), ", "))
	}
	s, err := o(ctx, rawURL, mode)
	if err != nil {
		return nil, redact.Error(err, rawURL)
	}
	return s, nil
}

// openSQLite opens sqlite:///absolute/path or sqlite:relative/path. Only a
// copy's target is created; any other command refuses a missing file
// rather than leave an empty store behind a typing mistake.
func openSQLite(ctx context.Context, rawURL string, mode Mode) (eventstore.Store, error) {
	path, err := SQLitePath(rawURL)
	if err != nil {
		return nil, err
	}
	if mode != Create {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, usagef("no SQLite store at %s (store URL %q)", path, rawURL)
		}
	}
	s, err := sqlite.Open(ctx, path, sqlite.Options{ReadOnly: mode == ReadOnly})
	if err != nil {
		return nil, explainSQLite(path, err)
	}
	return s, nil
}

// SQLitePath returns the file a SQLite store URL names:
// sqlite:///absolute/path, or sqlite:relative/path. A service that names its
// store by URL, as the command line does, reads it with this.
func SQLitePath(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", &UsageError{Msg: fmt.Sprintf("store URL %q", rawURL), Err: err}
	}
	path := u.Path
	if u.Opaque != "" {
		path = u.Opaque // sqlite:relative/path
	}
	if u.Host != "" && u.Host != "localhost" {
		return "", usagef("store URL %q: a SQLite URL names a file, sqlite:///absolute/path or sqlite:relative/path, not a host (%q)", rawURL, u.Host)
	}
	if path == "" {
		return "", usagef("store URL %q names no file", rawURL)
	}
	return path, nil
}

// explainSQLite adds what a person can do to the errors of opening a file.
func explainSQLite(path string, err error) error {
	switch {
	case errors.Is(err, sqlite.ErrNewerSchema):
		return fmt.Errorf("%w (use a cairn built with that version of Cairn or a later one)", err)
	case errors.Is(err, sqlite.ErrBusy):
		return fmt.Errorf("%s is locked by another process, which held it past the busy timeout: retry, or stop the process that holds it: %w", path, err)
	case errors.Is(err, sqlite.ErrNotEventStore):
		return &UsageError{Msg: fmt.Sprintf("%s is not a Cairn event store", path), Err: err}
	}
	return err
}

// openPostgres opens postgres://... as PostgresConn reads it.
func openPostgres(ctx context.Context, rawURL string, mode Mode) (eventstore.Store, error) {
	conn, schema, err := PostgresConn(rawURL)
	if err != nil {
		return nil, err
	}
	return postgres.Open(ctx, conn, postgres.Options{Schema: schema, ReadOnly: mode == ReadOnly})
}

// PostgresConn reads a PostgreSQL store URL: it returns the connection
// string for pgx (the URL without its schema parameter) and the store's
// schema (the schema parameter; "" for [postgres.DefaultSchema]). Unless
// the URL sets search_path, the connection's is the store's schema, then
// public, so that the tables a service keeps beside its store (the read
// models of transactional projections) are made and found in the store's
// schema, and two stores in one database share none. A service that names
// its store by URL, as the command line does, reads it with this.
func PostgresConn(rawURL string) (conn, schema string, err error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", "", &UsageError{Msg: "store URL is not a URL", Err: err}
	}
	q := u.Query()
	schema = q.Get("schema")
	q.Del("schema")
	if q.Get("search_path") == "" {
		name := schema
		if name == "" {
			name = postgres.DefaultSchema
		}
		q.Set("search_path", pgx.Identifier{name}.Sanitize()+", public")
	}
	u.RawQuery = q.Encode()
	return u.String(), schema, nil
}
