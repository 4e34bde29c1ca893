package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
)

// TestCommandResultUsesIndex checks that finding a command's events is an
// index lookup on events_stream_command, with the plan PostgreSQL picks for
// the first executions (parameters known) and with the generic plan it may
// switch to later (parameters unknown: the statement must repeat the
// index's predicate for the index to qualify).
func TestCommandResultUsesIndex(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, postgres.Options{})
	// Enough rows, most without a command ID, that a scan costs more than
	// the index; then statistics, as autovacuum would gather them.
	for i := range 20 {
		var batch []eventstore.EventData
		for j := range 100 {
			e := eventstore.EventData{Type: "t", SchemaVersion: 1, Data: []byte("{}")}
			if j%10 == 0 {
				e.Metadata.CommandID = fmt.Sprintf("cmd-%d-%d", i, j)
			}
			batch = append(batch, e)
		}
		_, err := s.Append(ctx, fmt.Sprintf("order-%d", i%4), eventstore.Any, batch...)
		require.NoError(t, err)
	}
	_, err := s.Pool().Exec(ctx, `ANALYZE `+pgx.Identifier{s.Schema(), "events"}.Sanitize())
	require.NoError(t, err)

	r, found, err := s.CommandResult(ctx, "order-1", "cmd-5-30")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, r.FirstVersion, r.LastVersion)
	assert.True(t, r.Duplicate)

	for _, mode := range []string{"auto", "force_custom_plan", "force_generic_plan"} {
		t.Run(mode, func(t *testing.T) {
			plan := explain(t, s, mode, "order-1", "cmd-5-30")
			assert.Contains(t, plan, "events_stream_command", "the plan does not use the command index:\n%s", plan)
		})
	}
}

func explain(t *testing.T, s *postgres.Store, planCacheMode, stream, commandID string) string {
	t.Helper()
	ctx := context.Background()
	var lines []string
	err := pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('plan_cache_mode', $1, true)`, planCacheMode); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `PREPARE command_result(text, text) AS `+s.CommandResultSQL()); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `EXPLAIN EXECUTE command_result(`+quote(stream)+`, `+quote(commandID)+`)`)
		if err != nil {
			return err
		}
		lines, err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DEALLOCATE command_result`)
		return err
	})
	require.NoError(t, err)
	return strings.Join(lines, "\n")
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
