package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
)

// Review (S3) of schema step 6 from the side of what was stored before it:
// a schema migrated with commands in it, and a process of the previous
// release still running on it.

// commandResultSQLV5 is CommandResult's statement in the release before
// schema step 6 (a4787db).
const commandResultSQLV5 = `SELECT min(version) OVER (), version, tx_id, seq FROM {{s}}.events
	WHERE stream = $1 AND command_id = $2 AND command_id <> ''
	ORDER BY version DESC LIMIT 1`

// TestReviewS3OlderProcessAfterStep6: a process of the release before,
// running when this release migrates the schema (Open takes the advisory
// lock, not the older process's connections), keeps its own statement. The
// rebuilt index no longer qualifies for it, so its lookups read the stream
// (docs/postgres.md says to stop older processes first); but it still
// answers right, for commands named by the bus and others alike.
func TestReviewS3OlderProcessAfterStep6(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, postgres.Options{})
	_, err := s.Append(ctx, "order-1", eventstore.NoStream, eventstore.EventData{Type: "t", SchemaVersion: 1,
		Data: []byte("{}"), Metadata: eventstore.Metadata{CommandID: "plain"}})
	require.NoError(t, err)
	bus, err := s.Append(ctx, "order-1", eventstore.Exact(0), s3Named("order-1", "c1", 0, 3)...)
	require.NoError(t, err)
	stmt := strings.ReplaceAll(commandResultSQLV5, "{{s}}", pgx.Identifier{s.Schema()}.Sanitize())
	for _, c := range []struct {
		id          string
		first, last int64
	}{{"plain", 0, 0}, {"c1", int64(bus.FirstVersion), int64(bus.LastVersion)}} {
		var first, last, seq int64
		var txID uint64
		require.NoError(t, s.Pool().QueryRow(ctx, stmt, "order-1", c.id).Scan(&first, &last, &txID, &seq), c.id)
		assert.Equal(t, [2]int64{c.first, c.last}, [2]int64{first, last}, "the older release's answer for %s", c.id)
	}
}

// TestReviewS3MigratedSchemaAnswersAsBefore: a version-5 schema holding
// random mixes of the bus's and other commands' events, as that release
// wrote them, is opened by this release; then random appends follow, some
// repeating old ones or continuing old commands. Every command of every
// stream is found as the old statement finds it.
func TestReviewS3MigratedSchemaAnswersAsBefore(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			ctx := context.Background()
			schema := server.NewSchema("s3migrate")
			s := newStore(t, postgres.Options{Schema: schema})
			q := pgx.Identifier{schema}.Sanitize()
			_, err := s.Pool().Exec(ctx, undoStep6(q)+`DELETE FROM `+q+`.schema_version WHERE version > 5`)
			require.NoError(t, err)
			r := rand.New(rand.NewPCG(seed, 99))
			history := map[string][][]eventstore.EventData{}
			wantMark := map[string]map[uint64]bool{}
			held := map[string]map[[16]byte]bool{}
			for range 40 {
				stream := s3Streams[r.IntN(len(s3Streams))]
				evs := s3RandomAppend(r, stream, history[stream])
				if held[stream] == nil {
					held[stream] = map[[16]byte]bool{}
					wantMark[stream] = map[uint64]bool{}
				}
				clash := false
				for _, e := range evs {
					clash = clash || held[stream][e.ID]
				}
				if clash {
					continue // that release refused it, or wrote nothing
				}
				for _, e := range evs {
					v := uint64(len(wantMark[stream]))
					_, err := s.Pool().Exec(ctx, `INSERT INTO `+q+`.events (stream, version, event_id, type, schema_version, data, command_id)
						VALUES ($1, $2, $3, 't', 1, '\x7b7d', $4)`, stream, int64(v), e.ID.String(), e.Metadata.CommandID)
					require.NoError(t, err)
					held[stream][e.ID] = true
					wantMark[stream][v] = false
				}
				history[stream] = append(history[stream], evs)
			}
			require.NoError(t, s.Close())
			s3RunModel(t, reopenMigrated(t, schema), seed, history, wantMark)
		})
	}
}
