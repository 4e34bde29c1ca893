package postgres_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/eventstore/storetest"
)

// TestMigratesFromVersion1 opens a schema as the first release left it
// (events only) and checks that the store adds the consumer tables and the
// command index, keeping the events.
func TestMigratesFromVersion1(t *testing.T) {
	ctx := context.Background()
	schema := server.NewSchema("migrate")
	s := newStore(t, postgres.Options{Schema: schema})
	_, err := s.Append(ctx, "order-1", eventstore.NoStream, eventstore.EventData{Type: "t", SchemaVersion: 1, Data: []byte("{}"),
		Metadata: eventstore.Metadata{CommandID: "c1"}})
	require.NoError(t, err)
	q := pgx.Identifier{schema}.Sanitize()
	_, err = s.Pool().Exec(ctx, `DROP TABLE `+q+`.snapshots, `+q+`.checkpoints, `+q+`.dead_letters, `+q+`.leases;
		DROP INDEX `+q+`.events_stream_command;
		ALTER TABLE `+q+`.events DROP COLUMN derived_id;
		DELETE FROM `+q+`.schema_version WHERE version > 1`)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	s2 := reopenMigrated(t, schema)
	r, found, err := s2.CommandResult(ctx, "order-1", "c1")
	require.NoError(t, err)
	require.True(t, found, "the event of the first release is found by its command")
	assert.Equal(t, uint64(0), r.LastVersion)
	require.NoError(t, s2.SaveCheckpoint(ctx, "c", eventstore.Start, r.Position, 0))
	_, ok, err := s2.AcquireLease(ctx, "c", "me", time.Second)
	require.NoError(t, err)
	assert.True(t, ok)
}

// TestMigratesDeadLettersToStreamKey opens a schema of version 2, whose
// dead letters are keyed by (consumer, event_id, part), with dead letters
// in it: the store re-keys them by stream too, keeps every one, and from
// then on the same event ID in another stream is a dead letter of its own.
func TestMigratesDeadLettersToStreamKey(t *testing.T) {
	ctx := context.Background()
	schema := server.NewSchema("migrate")
	s := newStore(t, postgres.Options{Schema: schema})
	q := pgx.Identifier{schema}.Sanitize()
	// Back to version 2, then rows as version 2 wrote them.
	_, err := s.Pool().Exec(ctx, undoStep4(q)+`
		ALTER TABLE `+q+`.dead_letters DROP CONSTRAINT dead_letters_stream_event,
			ADD CONSTRAINT dead_letters_event PRIMARY KEY (consumer, event_id, part);
		DELETE FROM `+q+`.schema_version WHERE version > 2`)
	require.NoError(t, err)
	checkMigratedLetters(t, s, schema, "version 2")
}

// TestMigratesDeadLetterGenerations opens a schema of version 3, whose
// dead letters have no generation, with dead letters in it: each is at its
// first generation, found by its position, and a retry's compare-and-set
// works on it.
func TestMigratesDeadLetterGenerations(t *testing.T) {
	s, schema := storeAtVersion(t, 3, undoStep4)
	checkMigratedLetters(t, s, schema, "version 3")
}

// TestMigratesDeadLetterClaims opens a schema of version 4, whose dead
// letters have no claim column, with dead letters in it: none is claimed,
// and a retry can claim each.
func TestMigratesDeadLetterClaims(t *testing.T) {
	s, schema := storeAtVersion(t, 4, undoStep5)
	checkMigratedLetters(t, s, schema, "version 4")
}

// undoStep6 is the SQL that takes the quoted schema q back from version 6
// (the command bus's appends marked and left out of the command index) to
// version 5.
func undoStep6(q string) string {
	return `DROP INDEX ` + q + `.events_stream_command;
		ALTER TABLE ` + q + `.events DROP COLUMN derived_id;
		CREATE INDEX events_stream_command ON ` + q + `.events (stream, command_id) WHERE command_id <> '';`
}

// undoStep5 is the SQL that takes the quoted schema q back from version 6
// to version 4 (dead letters without claims).
func undoStep5(q string) string {
	return undoStep6(q) + `ALTER TABLE ` + q + `.dead_letters DROP COLUMN claimed_until;`
}

// undoStep4 is the SQL that takes the dead letters of the quoted schema q
// back from version 6 to version 3 (no generations, no position index).
func undoStep4(q string) string {
	return undoStep5(q) + `ALTER TABLE ` + q + `.dead_letters DROP COLUMN generation;
		DROP INDEX ` + q + `.dead_letters_position;`
}

// checkMigratedLetters writes two dead letters into the dead_letters table
// of s, at an older version, as that version wrote them; then it closes s
// and checks that opening the schema again migrates them.
func checkMigratedLetters(t *testing.T, s *postgres.Store, schema, version string) {
	ctx := context.Background()
	q := pgx.Identifier{schema}.Sanitize()
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	id := uuid.New()
	for i, letter := range []string{"01JNQ0000000000000000000A1", "01JNQ0000000000000000000A2"} {
		eventID := id
		if i == 1 {
			eventID = uuid.New()
		}
		_, err := s.Pool().Exec(ctx, `INSERT INTO `+q+`.dead_letters (consumer, event_id, part, id, stream, version, major, minor,
				type, schema_version, data, correlation_id, causation_id, command_id, extra, recorded_at, error, attempts,
				first_failure, last_failure)
			VALUES ('proj', $1, 0, $2, 'order-1', $3, $4, 0, 'order.placed', 1, '\x7b7d', 'corr', '', '', '{"k":"v"}', $5, 'boom', 3, $5, $6)`,
			eventID.String(), letter, i, 10+i, at, at.Add(time.Second))
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	s2 := reopenMigrated(t, schema)
	var letters []eventstore.DeadLetter
	for d, err := range s2.DeadLetters(ctx, "proj") {
		require.NoError(t, err)
		letters = append(letters, d)
	}
	require.Len(t, letters, 2, "the dead letters of %s survive the migration", version)
	storetest.CheckMigratedDeadLetter(t, s2, eventstore.DeadLetter{ID: "01JNQ0000000000000000000A1", Consumer: "proj",
		Error: "boom", Attempts: 3, FirstFailure: at, LastFailure: at.Add(time.Second),
		Event: eventstore.Event{StreamID: "order-1", Position: eventstore.Position{Major: 10}, RecordedAt: at,
			EventData: eventstore.EventData{ID: id, Type: "order.placed", SchemaVersion: 1, Data: []byte("{}"),
				Metadata: eventstore.Metadata{CorrelationID: "corr", Extra: map[string]string{"k": "v"}}}}})
}

// TestMigratesTheCommandIndex opens a schema of version 5, whose command
// index holds every event that carries a command ID: every command stays
// findable (the rebuilt index holds the events stored before), and the
// command bus's appends from then on stay out of the index.
func TestMigratesTheCommandIndex(t *testing.T) {
	ctx := context.Background()
	s, schema := storeAtVersion(t, 5, undoStep6)
	q := pgx.Identifier{schema}.Sanitize()
	// Events as version 5 wrote them: the bus's names, no mark.
	for _, e := range []struct {
		stream  string
		version int
		id      uuid.UUID
		command string
	}{
		{"order-1", 0, storekit.CommandEventID("order-1", "c1", 0), "c1"},
		{"order-1", 1, storekit.CommandEventID("order-1", "c2", 0), "c2"},
		{"order-1", 2, storekit.CommandEventID("order-1", "c2", 1), "c2"},
		{"order-1", 3, uuid.New(), ""},
		{"order-2", 0, uuid.New(), "c9"},
	} {
		_, err := s.Pool().Exec(ctx, `INSERT INTO `+q+`.events (stream, version, event_id, type, schema_version, data, command_id)
			VALUES ($1, $2, $3, 't', 1, '\x7b7d', $4)`, e.stream, e.version, e.id.String(), e.command)
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	s2 := reopenMigrated(t, schema)
	indexed := func() []string {
		rows, err := s2.Pool().Query(ctx, `SELECT command_id FROM `+q+`.events WHERE command_id <> '' AND NOT derived_id ORDER BY tx_id, seq`)
		require.NoError(t, err)
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return ids
	}
	assert.Equal(t, []string{"c1", "c2", "c2", "c9"}, indexed(), "the old index's entries")
	for _, c := range []struct {
		stream, id  string
		first, last uint64
	}{{"order-1", "c1", 0, 0}, {"order-1", "c2", 1, 2}, {"order-2", "c9", 0, 0}} {
		got, found, err := s2.CommandResult(ctx, c.stream, c.id)
		require.NoError(t, err)
		require.True(t, found, c.id)
		assert.Equal(t, [2]uint64{c.first, c.last}, [2]uint64{got.FirstVersion, got.LastVersion}, c.id)
	}

	// A redelivered command of before is absorbed by its IDs, and a new
	// one stays out of the index.
	again, err := s2.Append(ctx, "order-1", eventstore.Exact(0), busNamed("order-1", "c2", 2)...)
	require.NoError(t, err)
	assert.True(t, again.Duplicate)
	assert.Equal(t, [2]uint64{1, 2}, [2]uint64{again.FirstVersion, again.LastVersion})
	added, err := s2.Append(ctx, "order-1", eventstore.Exact(3), busNamed("order-1", "c3", 20)...)
	require.NoError(t, err)
	assert.Equal(t, []string{"c1", "c2", "c2", "c9"}, indexed())
	got, found, err := s2.CommandResult(ctx, "order-1", "c3")
	require.NoError(t, err)
	require.True(t, found)
	added.Duplicate = true
	assert.Equal(t, added, got, "a command of more events than a page")
}

// busNamed returns n events of command id in stream, named as the command
// bus names them.
func busNamed(stream, id string, n int) []eventstore.EventData {
	evs := make([]eventstore.EventData, n)
	for i := range evs {
		evs[i] = eventstore.EventData{ID: storekit.CommandEventID(stream, id, i), Type: "t", SchemaVersion: 1,
			Data: []byte("{}"), Metadata: eventstore.Metadata{CommandID: id}}
	}
	return evs
}

// storeAtVersion returns a store in a new schema taken back to version by
// undo (SQL on the quoted schema name), and the schema's name.
func storeAtVersion(t *testing.T, version int, undo func(q string) string) (*postgres.Store, string) {
	t.Helper()
	schema := server.NewSchema("migrate")
	s := newStore(t, postgres.Options{Schema: schema})
	q := pgx.Identifier{schema}.Sanitize()
	_, err := s.Pool().Exec(context.Background(), undo(q)+`
		DELETE FROM `+q+`.schema_version WHERE version > `+strconv.Itoa(version))
	require.NoError(t, err)
	return s, schema
}

// reopenMigrated opens schema again, which migrates it, and checks that it
// reached this build's version.
func reopenMigrated(t *testing.T, schema string) *postgres.Store {
	ctx := context.Background()
	s, err := postgres.Open(ctx, server.URL, postgres.Options{Schema: schema})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	var version int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT max(version) FROM `+pgx.Identifier{schema}.Sanitize()+`.schema_version`).Scan(&version))
	assert.Equal(t, postgres.SchemaVersion, version)
	return s
}
