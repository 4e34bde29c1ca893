package cli

import (
	"context"
	"errors"
	"os"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/internal/redact"
)

// refuseSameStore refuses a copy whose target is its source under another
// URL (sqlite:///dir/events.db and sqlite:events.db run in dir, or two
// host names of one PostgreSQL server): the copy would write its own
// checkpoint into the source, which it opened to only read. The target is
// opened read-only to look, so that a target that does not exist yet is
// neither created nor taken for the source.
func (a *app) refuseSameStore(ctx context.Context, from eventstore.Store, fromURL, toURL string) error {
	if fromURL == toURL {
		return usagef("a store cannot be copied onto itself: --from and --to are both %s", redact.ConnString(fromURL))
	}
	to, err := open(ctx, toURL, ReadOnly, a.opts.Stores)
	if err != nil {
		return nil // no store there yet, or none this look can open: not the source
	}
	same, err := sameStore(ctx, from, to)
	err = errors.Join(err, to.Close())
	if err != nil {
		return err
	}
	if same {
		return usagef("a store cannot be copied onto itself: --to %s is the store --from %s names", redact.ConnString(toURL), redact.ConnString(fromURL))
	}
	return nil
}

// sameStore reports whether a and b are one store: the same SQLite file,
// or the same schema of the same database on the same PostgreSQL server
// (its port, and the time its postmaster started, which no two servers
// share). Stores of other kinds are compared by nothing, and taken as
// different.
func sameStore(ctx context.Context, a, b eventstore.Store) (bool, error) {
	switch a := a.(type) {
	case *sqlite.Store:
		b, ok := b.(*sqlite.Store)
		if !ok {
			return false, nil
		}
		fa, err := os.Stat(a.Path())
		if err != nil {
			return false, err
		}
		fb, err := os.Stat(b.Path())
		if err != nil {
			return false, err
		}
		return os.SameFile(fa, fb), nil
	case *postgres.Store:
		b, ok := b.(*postgres.Store)
		if !ok || a.Schema() != b.Schema() {
			return false, nil
		}
		ida, err := serverIdentity(ctx, a)
		if err != nil {
			return false, err
		}
		idb, err := serverIdentity(ctx, b)
		if err != nil {
			return false, err
		}
		return ida == idb, nil
	}
	return false, nil
}

// serverIdentity names the database a PostgreSQL store is in, on its
// server, whatever host name reached it.
func serverIdentity(ctx context.Context, s *postgres.Store) (string, error) {
	var id string
	err := s.Pool().QueryRow(ctx, `SELECT current_database() || '/' || current_setting('port') || '/' || pg_postmaster_start_time()::text`).Scan(&id)
	return id, err
}
