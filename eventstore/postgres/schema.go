package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrations are the store's schema changes, in order: migrations[i] takes
// the schema from version i to version i+1. They only ever move forward;
// a released migration is never edited, a change is a new one. "{{s}}" is
// replaced by the quoted schema name.
var migrations = []string{
	// 1: the event log.
	//
	// (tx_id, seq) is the global position: the writing transaction's ID and
	// the order of the row within it. Readers take only rows whose tx_id is
	// below the xmin of their snapshot, so a transaction that commits late
	// cannot slip in behind a subscriber's checkpoint (see read.go).
	//
	// Optimistic concurrency needs no lock: two appends that pick the same
	// next version collide on events_stream_version, and retried appends of
	// the same IDs collide on events_stream_event_id.
	`CREATE TABLE {{s}}.events (
		tx_id          xid8        NOT NULL DEFAULT pg_current_xact_id(),
		seq            bigint      NOT NULL GENERATED ALWAYS AS IDENTITY,
		stream         text        NOT NULL,
		version        bigint      NOT NULL CHECK (version >= 0),
		event_id       uuid        NOT NULL,
		type           text        NOT NULL,
		schema_version bigint      NOT NULL,
		data           bytea       NOT NULL,
		correlation_id text        NOT NULL DEFAULT '',
		causation_id   text        NOT NULL DEFAULT '',
		command_id     text        NOT NULL DEFAULT '',
		extra          jsonb,
		recorded_at    timestamptz NOT NULL DEFAULT statement_timestamp(),
		CONSTRAINT events_position PRIMARY KEY (tx_id, seq),
		CONSTRAINT events_stream_version UNIQUE (stream, version),
		CONSTRAINT events_stream_event_id UNIQUE (stream, event_id)
	)`,

	// 2: what aggregates and consumers keep besides events (snapshot.go,
	// commandindex.go, checkpoint.go, deadletter.go, lease.go).
	//
	// The command index is partial: most events carry no command ID (the
	// store keeps it as ''), and they need no entry.
	//
	// Positions and fences are uint64 values kept as the bits of a signed
	// bigint: checkpoints only compare them for equality, and fences stay
	// below 2^63 (see storekit.Fence).
	`CREATE INDEX events_stream_command ON {{s}}.events (stream, command_id) WHERE command_id <> '';

	CREATE TABLE {{s}}.snapshots (
		stream         text        PRIMARY KEY,
		version        bigint      NOT NULL,
		type           text        NOT NULL,
		schema_version bigint      NOT NULL,
		data           bytea       NOT NULL,
		recorded_at    timestamptz NOT NULL DEFAULT statement_timestamp()
	);

	CREATE TABLE {{s}}.checkpoints (
		name       text        PRIMARY KEY,
		major      bigint      NOT NULL,
		minor      bigint      NOT NULL,
		fence      bigint      NOT NULL CHECK (fence >= 0),
		updated_at timestamptz NOT NULL DEFAULT statement_timestamp()
	);

	CREATE TABLE {{s}}.dead_letters (
		consumer       text        NOT NULL,
		event_id       uuid        NOT NULL,
		part           integer     NOT NULL CHECK (part >= 0),
		id             text        NOT NULL,
		stream         text        NOT NULL,
		version        bigint      NOT NULL,
		major          bigint      NOT NULL,
		minor          bigint      NOT NULL,
		type           text        NOT NULL,
		schema_version bigint      NOT NULL,
		data           bytea       NOT NULL,
		correlation_id text        NOT NULL,
		causation_id   text        NOT NULL,
		command_id     text        NOT NULL,
		extra          jsonb,
		recorded_at    timestamptz NOT NULL,
		error          text        NOT NULL,
		attempts       integer     NOT NULL,
		first_failure  timestamptz NOT NULL,
		last_failure   timestamptz NOT NULL,
		CONSTRAINT dead_letters_event PRIMARY KEY (consumer, event_id, part),
		CONSTRAINT dead_letters_id UNIQUE (consumer, id)
	);

	CREATE TABLE {{s}}.leases (
		name       text        PRIMARY KEY,
		holder     text        NOT NULL,
		fence      bigint      NOT NULL CHECK (fence > 0),
		expires_at timestamptz -- NULL once released
	)`,

	// 3: event IDs are unique per stream only, so two events that share an
	// ID in two streams must be two dead letters: the key takes the stream.
	// No existing row can collide under it, since the old key was narrower.
	`ALTER TABLE {{s}}.dead_letters DROP CONSTRAINT dead_letters_event,
		ADD CONSTRAINT dead_letters_stream_event PRIMARY KEY (consumer, stream, event_id, part)`,

	// 4: a dead letter's generation makes the park that records a failed
	// retry a compare-and-set on the state the retry read (every stored
	// dead letter is at its first); the index serves a consumer that asks
	// for the dead letters of the events it is to handle again, by
	// position, instead of reading them all.
	`ALTER TABLE {{s}}.dead_letters ADD COLUMN generation bigint NOT NULL DEFAULT 1 CHECK (generation > 0);
	CREATE INDEX dead_letters_position ON {{s}}.dead_letters (consumer, major)`,

	// 5: a retry claims the dead letter it runs on until a time (NULL for
	// none), so that a second retry of it is refused while the first
	// runs. No stored dead letter is claimed.
	`ALTER TABLE {{s}}.dead_letters ADD COLUMN claimed_until timestamptz`,

	// 6: derived_id is true for the events of an append that
	// storekit.CommandIDsDerived recognizes, as every append of the command
	// bus is: CommandResult finds such a command by its first event's ID on
	// events_stream_event_id, so the command index keeps only the other
	// events that carry a command ID. That spares every command an index
	// entry (a page at a random place, and its image in the WAL after each
	// checkpoint). Events stored before are false, as if not recognized:
	// the rebuilt index holds what the old one held.
	`ALTER TABLE {{s}}.events ADD COLUMN derived_id boolean NOT NULL DEFAULT false;
	DROP INDEX {{s}}.events_stream_command;
	CREATE INDEX events_stream_command ON {{s}}.events (stream, command_id) WHERE command_id <> '' AND NOT derived_id`,
}

// SchemaVersion is the schema version that this build of the store creates
// and expects.
var SchemaVersion = len(migrations)

// checkSchemaVersion refuses a schema that holds no store, or one at
// another version than [SchemaVersion], for a store opened read-only,
// which cannot migrate it.
func checkSchemaVersion(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, pgx.Identifier{schema, "schema_version"}.Sanitize()).Scan(&exists); err != nil {
		return fmt.Errorf("postgres: checking schema %q: %w", schema, err)
	}
	if !exists {
		return fmt.Errorf("postgres: schema %q holds no Cairn store (opened read-only, so it was not created)", schema)
	}
	var current int
	if err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT coalesce(max(version), 0) FROM %s.schema_version`, pgx.Identifier{schema}.Sanitize())).Scan(&current); err != nil {
		return fmt.Errorf("postgres: checking schema %q: %w", schema, err)
	}
	switch {
	case current > len(migrations):
		return fmt.Errorf("postgres: schema %q is at version %d, newer than this build of Cairn knows (%d): upgrade Cairn", schema, current, len(migrations))
	case current < len(migrations):
		return fmt.Errorf("postgres: schema %q is at version %d, older than this build's %d, and a store opened read-only does not migrate it: open it once read-write", schema, current, len(migrations))
	}
	return nil
}

// migrate creates the schema or brings it up to [SchemaVersion]. Several
// processes may start at once: an advisory lock on the schema's name lets
// one migrate while the others wait, then find nothing left to do.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	quoted := pgx.Identifier{schema}.Sanitize()
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('cairn.eventstore.migrate'), hashtext($1))`, schema); err != nil {
			return err
		}
		setup := fmt.Sprintf(`CREATE SCHEMA IF NOT EXISTS %[1]s;
			CREATE TABLE IF NOT EXISTS %[1]s.schema_version (
				version    integer     PRIMARY KEY,
				applied_at timestamptz NOT NULL DEFAULT now()
			)`, quoted)
		if _, err := tx.Exec(ctx, setup); err != nil {
			return err
		}
		var current int
		if err := tx.QueryRow(ctx, fmt.Sprintf(`SELECT coalesce(max(version), 0) FROM %s.schema_version`, quoted)).Scan(&current); err != nil {
			return err
		}
		if current > len(migrations) {
			return fmt.Errorf("postgres: schema %q is at version %d, newer than this build of Cairn knows (%d): upgrade Cairn", schema, current, len(migrations))
		}
		for v := current; v < len(migrations); v++ {
			if _, err := tx.Exec(ctx, strings.ReplaceAll(migrations[v], "{{s}}", quoted)); err != nil {
				return fmt.Errorf("postgres: migrating schema %q to version %d: %w", schema, v+1, err)
			}
			if _, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.schema_version (version) VALUES ($1)`, quoted), v+1); err != nil {
				return err
			}
		}
		return nil
	})
}
