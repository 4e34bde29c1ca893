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
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// TestCommandResultUsesIndex checks that finding a command's events is an
// index lookup on events_stream_command, with the plan PostgreSQL picks for
// the first executions (parameters known) and with the generic plan it may
// switch to later (parameters unknown: the statement must repeat the
// index's predicate for the index to qualify).
func TestCommandResultUsesIndex(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, postgres.Options{})
	// Most rows without a command ID.
	seedForPlans(t, s, func(i, j int, e *eventstore.EventData) {
		if j%10 == 0 {
			e.Metadata.CommandID = fmt.Sprintf("cmd-%d-%d", i, j)
		}
	})

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

// seedForPlans appends 2,000 events to four streams, each as mark leaves
// it (event j of batch i), enough that a scan costs the planner more than
// an index; then gathers statistics, as autovacuum would.
func seedForPlans(t *testing.T, s *postgres.Store, mark func(i, j int, e *eventstore.EventData)) {
	t.Helper()
	ctx := context.Background()
	for i := range 20 {
		batch := make([]eventstore.EventData, 100)
		for j := range batch {
			batch[j] = eventstore.EventData{Type: "t", SchemaVersion: 1, Data: []byte("{}")}
			if mark != nil {
				mark(i, j, &batch[j])
			}
		}
		_, err := s.Append(ctx, fmt.Sprintf("order-%d", i%4), eventstore.Any, batch...)
		require.NoError(t, err)
	}
	_, err := s.Pool().Exec(ctx, `ANALYZE `+pgx.Identifier{s.Schema(), "events"}.Sanitize())
	require.NoError(t, err)
}

func explain(t *testing.T, s *postgres.Store, planCacheMode, stream, commandID string) string {
	t.Helper()
	return explainPrepared(t, s, planCacheMode, `(text, text) AS `+s.CommandResultSQL(), quote(stream)+`, `+quote(commandID))
}

// TestCommandResultFindsTheBusByID checks that finding an append of the
// command bus is a lookup of its first event's ID, then a range of the
// stream from there, in every plan.
func TestCommandResultFindsTheBusByID(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, postgres.Options{})
	seedForPlans(t, s, nil)
	_, err := s.Append(ctx, "order-1", eventstore.Any, busNamed("order-1", "c1", 2)...)
	require.NoError(t, err)
	r, found, err := s.CommandResult(ctx, "order-1", "c1")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, [2]uint64{500, 501}, [2]uint64{r.FirstVersion, r.LastVersion})

	first := storekit.CommandEventID("order-1", "c1", 0)
	for _, mode := range []string{"auto", "force_custom_plan", "force_generic_plan"} {
		t.Run(mode, func(t *testing.T) {
			plan := explainPrepared(t, s, mode, `(text, text, uuid) AS `+s.CommandDerivedSQL(),
				`'order-1', 'c1', '`+first.String()+`'`)
			assert.Contains(t, plan, "events_stream_event_id", "the first event is not found by its ID:\n%s", plan)
			assert.Contains(t, plan, "events_stream_version", "the command's events are not a range of the stream:\n%s", plan)
			assert.NotContains(t, plan, "Seq Scan", plan)
		})
	}
}

// explainPrepared prepares a statement (its parameter types and text, after
// "PREPARE x"), and returns the plan of executing it with args in
// planCacheMode.
func explainPrepared(t *testing.T, s *postgres.Store, planCacheMode, statement, args string) string {
	t.Helper()
	ctx := context.Background()
	var lines []string
	err := pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('plan_cache_mode', $1, true)`, planCacheMode); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `PREPARE command_result`+statement); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `EXPLAIN EXECUTE command_result(`+args+`)`)
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
