package postgres

import (
	"strings"

	"github.com/jackc/pgx/v5"
)

// statements are the store's SQL, with its schema name filled in once.
type statements struct {
	// append is Append's statement for many events, and appendOne for one
	// event by the check of the expected version it makes.
	append          string
	appendOne       [appendChecks]string
	current, stored string
	// appendTx and appendOneTx are the append statements of AppendTx,
	// which also refuse to write behind a younger transaction (txorder.go).
	appendTx, appendOneTx string
	// appendGroup is a single-event append in a group (group.go): the
	// younger-writer check, and nothing written instead of a unique
	// violation, which would roll back the other appends of the group.
	appendGroup                   string
	readAll, streamFwd, streamBwd string
	lag, head                     string
}

// Expected-version kinds, as the append statement receives them.
const (
	kindAny = iota
	kindNoStream
	kindStreamExists
	kindExact
)

// eventColumns are the columns that decode into an [eventstore.Event], in
// the order scanEvent reads them.
const eventColumns = `tx_id, seq, stream, version, event_id, type, schema_version, data,
	correlation_id, causation_id, command_id, extra, recorded_at`

// appendCheck is how an append statement checks the expected version.
// Every statement takes its parameters in one order: $1 the stream, $2 to
// $9 the events' fields (each a value for one event, an array for many),
// $10 whether their IDs derive from their command ID, $11 the expected
// version and $12 its kind; a check that needs fewer takes the first ones.
type appendCheck uint8

const (
	// checkLast reads the stream's last version and compares it with the
	// expected one: for Any and StreamExists, for many events, and in
	// AppendTx's statements, which also look at the last event's writer.
	checkLast appendCheck = iota
	// checkExact, for one event, reads the event at the expected version,
	// which must exist, and inserts the next one unless the stream has
	// it (ON CONFLICT on (stream, version) DO NOTHING: the index's own
	// probe, before anything is written). Streams only grow, from version
	// 0, so the two make the stream's last version the expected one. It
	// is one index probe, where checkLast's subquery costs the server
	// some 3-5% of a whole append (CPU it must fetch back into its caches
	// after every round trip).
	checkExact
	// checkNew, for one event, reads nothing but the index's probe: a
	// stream that exists has a version 0.
	checkNew
	appendChecks
)

// A refused append writes nothing, whatever its check: no row, no WAL but
// a commit record, and no error in the server's log, whose statement text
// would hold the event's data in the simple protocol. The conflict clause
// does that for the checks that do not read the last version, which form
// the row before the index refuses it, so that its tx_id default takes a
// transaction ID (TestReviewS12StaleRefusalWritesNothingOnTheServer). It
// suits one event only, for it skips a row, not the statement: of many
// events, those after a version another append took would be written.
const onVersionTaken = `
			ON CONFLICT (stream, version) DO NOTHING`

// appendParams is how many parameters the statements of each check take.
var appendParams = [appendChecks]int{checkLast: 12, checkExact: 11, checkNew: 10}

// nextVersion is the stream's next version as the expected version allows
// it, NULL when it does not: $12 is the kind, $11 the exact version.
const nextVersion = `CASE $12::int
					WHEN 0 THEN coalesce(last + 1, 0)
					WHEN 1 THEN CASE WHEN last IS NULL THEN 0 END
					WHEN 2 THEN last + 1
					ELSE CASE WHEN last = $11::bigint THEN last + 1 END
				END`

// appendHead and appendTail frame the append statements: the stream's
// next version, and the position and version of each row inserted.
const (
	appendHead = `INSERT INTO {{s}}.events (stream, version, event_id, type, schema_version, data,
				correlation_id, causation_id, command_id, extra, derived_id)`
	appendBase = `(SELECT ` + nextVersion + ` AS next
				FROM (SELECT max(version) AS last FROM {{s}}.events WHERE stream = $1) AS cur) AS base`
	appendTail = `
			RETURNING tx_id, seq, version`
)

// lastEvent is the version and transaction ID of stream $1's last event,
// as one row that is NULL for a stream without events. One descent of the
// (stream, version) index, like max(version).
const lastEvent = `(SELECT l.version AS last, l.tx_id AS last_tx
				FROM (SELECT) AS one LEFT JOIN LATERAL (
					SELECT version, tx_id FROM {{s}}.events WHERE stream = $1 ORDER BY version DESC LIMIT 1
				) AS l ON true)`

// appendBaseTx and appendCondTx make an append inside a longer
// transaction write nothing when the stream's last event belongs to a
// younger transaction: the new events' tx_id, the caller's, would put them
// before it in global order (txorder.go). The caller's ID is the top-level
// one, which the rows get, also in AppendTx's savepoint. A transaction that
// has no ID yet gets one in this statement, after its snapshot, so younger
// than every event the statement sees: it passes, and the check takes no
// ID for a statement that may write nothing (an ID would hold every
// subscriber's horizon back until the transaction ends).
const (
	appendBaseTx = `(SELECT ` + nextVersion + ` AS next, cur.last_tx
				FROM ` + lastEvent + ` AS cur) AS base`
	appendCondTx = ` AND (base.last_tx IS NULL OR base.last_tx <= coalesce(pg_current_xact_id_if_assigned(), base.last_tx))`
)

// appendSource is where an append statement takes the stream's next
// version from: next, over the relation from (none when empty), where
// where holds; conflict is its conflict clause, if any.
type appendSource struct{ next, from, where, conflict string }

var (
	// sourceLast is checkLast's, and sourceLastTx AppendTx's.
	sourceLast   = appendSource{next: "base.next", from: appendBase, where: "base.next IS NOT NULL"}
	sourceLastTx = appendSource{next: "base.next", from: appendBaseTx, where: "base.next IS NOT NULL" + appendCondTx}
	sourceExact  = appendSource{next: "prev.version + 1", from: "{{s}}.events AS prev",
		where: "prev.stream = $1 AND prev.version = $11::bigint", conflict: onVersionTaken}
	sourceNew = appendSource{next: "0", conflict: onVersionTaken}
	// sourceGroup is a group's (group.go): AppendTx's check, and nothing
	// written instead of a unique violation, which would roll back the
	// other appends of the group.
	sourceGroup = appendSource{next: sourceLastTx.next, from: sourceLastTx.from, where: sourceLastTx.where, conflict: `
			ON CONFLICT DO NOTHING`}
)

// appendMany and appendSingle are the append statements that take the
// next version from src, inserting only where its condition holds.
func appendMany(src appendSource) string {
	from := ""
	if src.from != "" {
		from = src.from + ", "
	}
	return appendHead + `
			SELECT $1, ` + src.next + ` + e.ord - 1, e.id, e.type, e.sv, e.data,
				e.corr, e.caus, e.cmd, nullif(e.extra, '')::jsonb, $10::boolean
			FROM ` + from + `unnest($2::uuid[], $3::text[], $4::bigint[], $5::bytea[],
				$6::text[], $7::text[], $8::text[], $9::text[])
				WITH ORDINALITY AS e(id, type, sv, data, corr, caus, cmd, extra, ord)` + where(src) + src.conflict + appendTail
}

func appendSingle(src appendSource) string {
	from := ""
	if src.from != "" {
		from = `
			FROM ` + src.from
	}
	return appendHead + `
			SELECT $1, ` + src.next + `, $2::uuid, $3::text, $4::bigint, $5::bytea,
				$6::text, $7::text, $8::text, nullif($9::text, '')::jsonb, $10::boolean` + from + where(src) + src.conflict + appendTail
}

// where is src's WHERE clause, if it has a condition.
func where(src appendSource) string {
	if src.where == "" {
		return ""
	}
	return `
			WHERE ` + src.where
}

func newStatements(schema string) statements {
	q := pgx.Identifier{schema}.Sanitize()
	fill := func(sql string) string { return strings.ReplaceAll(sql, "{{s}}", q) }
	return statements{
		// One statement, so one round trip: it checks the expected
		// version and inserts every event. It inserts nothing when the
		// check fails, and fails with a unique violation when another
		// append took the versions or the IDs first; in both cases Append
		// looks closer (append.go). Only the rows it writes are locked.
		append: fill(appendMany(sourceLast)),
		appendOne: [appendChecks]string{checkLast: fill(appendSingle(sourceLast)),
			checkExact: fill(appendSingle(sourceExact)), checkNew: fill(appendSingle(sourceNew))},
		// AppendTx's: the last version's check, with the younger-writer's.
		appendTx:    fill(appendMany(sourceLastTx)),
		appendOneTx: fill(appendSingle(sourceLastTx)),
		appendGroup: fill(appendSingle(sourceGroup)),
		// Why an append wrote nothing: the stream's last event, and the
		// caller's transaction ID if it has one (NULL outside a transaction
		// that wrote, where no ID need be taken).
		current: fill(`SELECT cur.last, cur.last_tx, pg_current_xact_id_if_assigned() FROM ` + lastEvent + ` AS cur`),
		stored:  fill(`SELECT event_id, version, tx_id, seq FROM {{s}}.events WHERE stream = $1 AND event_id = ANY($2::uuid[])`),

		// The horizon and the page come from one statement, hence one
		// snapshot: every transaction below the snapshot's xmin has ended,
		// so the page holds every committed event up to the horizon.
		// head is the newest transaction with events in the snapshot, which
		// ReadAll waits for.
		readAll: fill(`WITH h AS MATERIALIZED (
				SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin,
					(SELECT tx_id FROM {{s}}.events ORDER BY tx_id DESC LIMIT 1) AS head
			)
			SELECT h.xmin, coalesce(h.head, '0'::xid8), e.tx_id IS NOT NULL,
				coalesce(e.tx_id, '0'::xid8), coalesce(e.seq, 0), coalesce(e.stream, ''), coalesce(e.version, 0),
				coalesce(e.event_id, '00000000-0000-0000-0000-000000000000'::uuid), coalesce(e.type, ''),
				coalesce(e.schema_version, 0), coalesce(e.data, ''::bytea), coalesce(e.correlation_id, ''),
				coalesce(e.causation_id, ''), coalesce(e.command_id, ''), e.extra, coalesce(e.recorded_at, 'epoch'::timestamptz)
			FROM h LEFT JOIN LATERAL (
				SELECT ` + eventColumns + ` FROM {{s}}.events
				WHERE (tx_id, seq) > ($1::xid8, $2::bigint) AND tx_id < h.xmin
					AND ($3::text[] IS NULL OR type = ANY($3::text[]))
					AND ($4::text[] IS NULL OR EXISTS (SELECT FROM unnest($4::text[]) AS p WHERE starts_with(stream, p)))
				ORDER BY tx_id, seq
				LIMIT $5
			) e ON true`),
		streamFwd: fill(`SELECT ` + eventColumns + ` FROM {{s}}.events
			WHERE stream = $1 AND version >= $2 ORDER BY version LIMIT $3`),
		streamBwd: fill(`SELECT ` + eventColumns + ` FROM {{s}}.events
			WHERE stream = $1 AND version <= $2 ORDER BY version DESC LIMIT $3`),

		head: fill(`SELECT tx_id, seq FROM {{s}}.events ORDER BY tx_id DESC, seq DESC LIMIT 1`),
		lag: fill(`WITH h AS MATERIALIZED (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin)
			SELECT h.xmin,
				(SELECT count(*) FROM {{s}}.events WHERE tx_id >= h.xmin),
				(SELECT extract(epoch FROM clock_timestamp() - min(recorded_at))::float8 FROM {{s}}.events WHERE tx_id >= h.xmin),
				a.pid, extract(epoch FROM clock_timestamp() - a.xact_start)::float8, a.state
			FROM h LEFT JOIN LATERAL (
				SELECT pid, xact_start, coalesce(state, '') AS state FROM pg_stat_activity
				WHERE backend_xid IS NOT NULL ORDER BY age(backend_xid) DESC LIMIT 1
			) a ON true`),
	}
}
