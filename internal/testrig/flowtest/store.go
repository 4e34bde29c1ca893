package flowtest

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/sqlite"
)

// A store spec names a store that several processes open: "sqlite:<path
// of the file>" or "postgres:<schema>|<URL>". A child process gets its
// parent's in its environment.

// SQLite returns the spec of the SQLite store in the file at path.
func SQLite(path string) string { return "sqlite:" + path }

// Postgres returns the spec of the PostgreSQL store in schema of the
// server at url.
func Postgres(url, schema string) string { return "postgres:" + schema + "|" + url }

// StoreKind returns the kind of store spec names: "sqlite" or "postgres".
func StoreKind(spec string) string {
	kind, _, _ := strings.Cut(spec, ":")
	return kind
}

// Open opens the store that spec names. Close it when done.
func Open(ctx context.Context, spec string) (eventstore.Store, error) {
	kind, where, _ := strings.Cut(spec, ":")
	switch kind {
	case "sqlite":
		return sqlite.Open(ctx, where, sqlite.Options{})
	case "postgres":
		schema, url, _ := strings.Cut(where, "|")
		return postgres.Open(ctx, url, postgres.Options{Schema: schema})
	}
	return nil, fmt.Errorf("%w: flowtest: store spec %q is neither sqlite:<path> nor postgres:<schema>|<url>", eventstore.ErrInvalidArgument, spec)
}

// readModelTable is the read model's table: how many times the projection
// counted each event of the flow's aggregates.
const readModelTable = "flowtest_counts"

// qualified returns the read model table's name in s's SQL.
func qualified(s eventstore.Store) string {
	if pg, ok := s.(*postgres.Store); ok {
		return pgx.Identifier{pg.Schema(), readModelTable}.Sanitize()
	}
	return readModelTable
}
