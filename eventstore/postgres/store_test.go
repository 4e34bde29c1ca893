package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
)

// waitLimit bounds waits for things that must happen; it is a liveness
// bound, not a speed check.
const waitLimit = 30 * time.Second

// collect runs a subscription in the background and sends what it yields.
func collect(t *testing.T, s eventstore.Store, after eventstore.Position) (<-chan eventstore.Event, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	events := make(chan eventstore.Event, 1024)
	done := make(chan error, 1)
	go func() {
		for e, err := range s.Subscribe(ctx, after, eventstore.Filter{}) {
			if err != nil {
				done <- err
				return
			}
			events <- e
		}
		done <- nil
	}()
	t.Cleanup(func() { cancel(); <-done })
	return events, done
}

func take(t *testing.T, events <-chan eventstore.Event, done <-chan error, n int) []eventstore.Event {
	t.Helper()
	var out []eventstore.Event
	limit := time.After(waitLimit)
	for len(out) < n {
		select {
		case e := <-events:
			out = append(out, e)
		case err := <-done:
			require.FailNow(t, "subscription ended", "after %d of %d events: %v", len(out), n, err)
		case <-limit:
			require.FailNow(t, "subscription stalled", "%d of %d events within %s", len(out), n, waitLimit)
		}
	}
	return out
}

func TestSubscriberResumesAfterBackendsAreTerminated(t *testing.T) {
	ctx := context.Background()
	schema := server.NewSchema("kill")
	app := "cairn_" + schema // names the store's connections, and only them, for the killer
	s := newStoreAt(t, withParam(server.URL, "application_name", app),
		postgres.Options{Schema: schema, PollInterval: 20 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}) // the retries it logs are expected
	admin := newPoolOnce(t)
	events, done := collect(t, s, eventstore.Start)

	const total = 200
	want := make([]uuid.UUID, total)
	appendErrs := 0
	killed := 0
	for i := range total {
		e := event("after-kill")
		want[i] = e.ID
		if i%20 == 10 {
			var n int
			require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
				FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n))
			killed += n
		}
		// An append that failed with the connection may or may not have
		// committed; repeating it with the same ID is safe either way.
		for attempt := 0; ; attempt++ {
			_, err := s.Append(ctx, fmt.Sprintf("kill-%d", i%7), eventstore.Any, e)
			if err == nil {
				break
			}
			require.False(t, errors.Is(err, eventstore.ErrWrongVersion) || errors.Is(err, eventstore.ErrEventIDConflict), "%v", err)
			require.Less(t, attempt, 50, "append keeps failing: %v", err)
			appendErrs++
		}
	}
	got := take(t, events, done, total)
	for i := 1; i < len(got); i++ {
		require.True(t, got[i-1].Position.Before(got[i].Position), "positions increase at %d", i)
	}
	ids := make([]uuid.UUID, len(got))
	for i, e := range got {
		ids[i] = e.ID
	}
	assert.ElementsMatch(t, want, ids, "every event exactly once")
	assert.Greater(t, killed, 10, "backends were terminated")
	t.Logf("terminated %d backends; %d appends retried", killed, appendErrs)
}

func TestNotifyWakesSubscribersOfAnotherStore(t *testing.T) {
	// Two stores on one schema stand for two processes. The subscriber's
	// poll interval is far beyond the wait limit, so only a NOTIFY from
	// the other store can deliver the event in time.
	schema := server.NewSchema("notify")
	reader := newStore(t, postgres.Options{Schema: schema, PollInterval: time.Hour})
	writer := newStore(t, postgres.Options{Schema: schema})
	events, done := collect(t, reader, eventstore.Start)
	e := event("cross-process")
	// The subscriber's LISTEN starts in the background; appending until the
	// event arrives covers the window before it listens.
	var got []eventstore.Event
	_, err := writer.Append(context.Background(), "notify-1", eventstore.NoStream, e)
	require.NoError(t, err)
	limit := time.After(waitLimit)
	for len(got) == 0 {
		select {
		case ev := <-events:
			got = append(got, ev)
		case err := <-done:
			require.FailNow(t, "subscription ended", "%v", err)
		case <-time.After(500 * time.Millisecond):
			_, err := writer.Append(context.Background(), "notify-2", eventstore.Any, event("nudge"))
			require.NoError(t, err)
		case <-limit:
			require.FailNow(t, "no notification arrived")
		}
	}
	assert.Equal(t, e.ID, got[0].ID)
}

func TestLagNamesTheTransactionHoldingSubscribersBack(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, postgres.Options{PollInterval: 20 * time.Millisecond})
	holder, err := pgx.Connect(ctx, server.URL)
	require.NoError(t, err)
	defer holder.Close(ctx)
	var pid int32
	require.NoError(t, holder.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid))
	tx, err := holder.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "SELECT pg_current_xact_id()") // takes a transaction ID, as any write does
	require.NoError(t, err)

	e := event("held-back")
	r, err := s.Append(ctx, "lag-1", eventstore.NoStream, e)
	require.NoError(t, err)

	lag, err := s.Lag(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), lag.Pending, "the new event waits for the older transaction")
	assert.True(t, lag.Horizon.Before(r.Position), "horizon %s is before the event at %s", lag.Horizon, r.Position)
	require.NotNil(t, lag.Holder)
	assert.Equal(t, pid, lag.Holder.PID)
	assert.Equal(t, "idle in transaction", lag.Holder.State)

	// The event is already in its stream, but not yet in the global order:
	// ReadAll waits for it (here until its deadline).
	require.Len(t, readStream(t, s, "lag-1"), 1)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	var readErr error
	for _, err := range s.ReadAll(short, eventstore.Start, eventstore.Filter{}) {
		readErr = err
	}
	assert.ErrorIs(t, readErr, context.DeadlineExceeded)

	events, done := collect(t, s, eventstore.Start)
	require.NoError(t, tx.Commit(ctx))
	got := take(t, events, done, 1)
	assert.Equal(t, e.ID, got[0].ID)

	lag, err = s.Lag(ctx)
	require.NoError(t, err)
	assert.Zero(t, lag.Pending)
	assert.Zero(t, lag.Delay)
	assert.False(t, lag.Horizon.Before(r.Position), "horizon %s has passed %s", lag.Horizon, r.Position)
}

func readStream(t *testing.T, s eventstore.Store, stream string) []eventstore.Event {
	t.Helper()
	var out []eventstore.Event
	for e, err := range s.ReadStream(context.Background(), stream, eventstore.ReadOptions{}) {
		require.NoError(t, err)
		out = append(out, e)
	}
	return out
}

func TestCorruptRowsAreErrorsNamingStreamAndVersion(t *testing.T) {
	ctx := context.Background()
	for name, row := range map[string]string{
		"extra is not an object of strings": `'{"a": 1}'::jsonb, 1`,
		"schema version out of range":       `NULL::jsonb, -5`,
	} {
		t.Run(name, func(t *testing.T) {
			s := newStore(t, postgres.Options{})
			_, err := newPoolOnce(t).Exec(ctx, fmt.Sprintf(`INSERT INTO %s.events
				(stream, version, event_id, type, schema_version, data, extra)
				SELECT 'bad-1', 0, gen_random_uuid(), 'order.placed', s, '\x'::bytea, x FROM (SELECT %s) AS v(x, s)`,
				pgx.Identifier{s.Schema()}.Sanitize(), row))
			require.NoError(t, err)
			for what, seq := range map[string]func(func(eventstore.Event, error) bool){
				"ReadStream": s.ReadStream(ctx, "bad-1", eventstore.ReadOptions{}),
				"ReadAll":    s.ReadAll(ctx, eventstore.Start, eventstore.Filter{}),
			} {
				var got error
				for _, err := range seq {
					got = err
				}
				require.ErrorIs(t, got, eventstore.ErrCorrupt, what)
				assert.Contains(t, got.Error(), `stream "bad-1", version 0, type "order.placed"`, what)
			}
		})
	}
}

func TestSchemaIsMigratedOnceAndForwardOnly(t *testing.T) {
	ctx := context.Background()
	admin := newPoolOnce(t)
	schema := server.NewSchema("migrate")
	t.Cleanup(func() { dropSchema(t, schema) })

	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := postgres.Open(ctx, server.URL, postgres.Options{Schema: schema})
			if err == nil {
				err = s.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err, "concurrent opens of one schema")
	}
	var versions []int32
	rows, err := admin.Query(ctx, fmt.Sprintf(`SELECT version FROM %s.schema_version ORDER BY version`, pgx.Identifier{schema}.Sanitize()))
	require.NoError(t, err)
	versions, err = pgx.CollectRows(rows, pgx.RowTo[int32])
	require.NoError(t, err)
	want := make([]int32, postgres.SchemaVersion)
	for i := range want {
		want[i] = int32(i + 1)
	}
	assert.Equal(t, want, versions, "each migration applied once")

	_, err = admin.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.schema_version (version) VALUES (99)`, pgx.Identifier{schema}.Sanitize()))
	require.NoError(t, err)
	_, err = postgres.Open(ctx, server.URL, postgres.Options{Schema: schema})
	require.Error(t, err, "a schema newer than the code is refused")
	assert.Contains(t, err.Error(), "version 99")
}

func TestSchemasAreIndependent(t *testing.T) {
	ctx := context.Background()
	a := newStore(t, postgres.Options{})
	b := newStore(t, postgres.Options{})
	_, err := a.Append(ctx, "order-1", eventstore.NoStream, event("a"))
	require.NoError(t, err)
	_, err = b.Append(ctx, "order-1", eventstore.NoStream, event("b"))
	require.NoError(t, err, "the same stream in another schema is another stream")
	assert.Len(t, readStream(t, a, "order-1"), 1)
	assert.Equal(t, "b", readStream(t, b, "order-1")[0].Type)
}

func TestAppendTxCommitsAndRollsBackWithTheTransaction(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, postgres.Options{})

	tx, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	_, err = s.AppendTx(ctx, tx, "tx-1", eventstore.NoStream, event("rolled-back"))
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(ctx))
	assert.Empty(t, readStream(t, s, "tx-1"), "a rolled-back append leaves nothing")

	tx, err = s.Pool().Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	first := event("first")
	r, err := s.AppendTx(ctx, tx, "tx-1", eventstore.NoStream, first)
	require.NoError(t, err)
	assert.Equal(t, eventstore.AppendResult{FirstVersion: 0, LastVersion: 0, Position: r.Position}, r)

	// A conflict inside the transaction is a typed error and leaves the
	// transaction, and what it wrote, usable.
	_, err = s.AppendTx(ctx, tx, "tx-1", eventstore.NoStream, event("conflict"))
	var wrong *eventstore.WrongVersionError
	require.ErrorAs(t, err, &wrong)
	assert.Equal(t, eventstore.Exact(0), wrong.Actual)
	again, err := s.AppendTx(ctx, tx, "tx-1", eventstore.NoStream, first)
	require.NoError(t, err)
	assert.True(t, again.Duplicate, "a repeat inside the transaction is absorbed")
	_, err = s.AppendTx(ctx, tx, "tx-1", eventstore.Exact(0), event("second"))
	require.NoError(t, err)
	assert.Empty(t, readStream(t, s, "tx-1"), "nothing is visible before commit")
	require.NoError(t, tx.Commit(ctx))
	s.Notify()

	got := readStream(t, s, "tx-1")
	require.Len(t, got, 2)
	assert.Equal(t, []string{"first", "second"}, []string{got[0].Type, got[1].Type})
	assert.Equal(t, r.Position, got[0].Position)
	assert.True(t, got[0].Position.Before(got[1].Position))
}

func TestWrongVersionCarriesTheActualVersion(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, postgres.Options{})
	_, err := s.Append(ctx, "v-1", eventstore.NoStream, event("a"), event("b"), event("c"))
	require.NoError(t, err)
	for _, expected := range []eventstore.ExpectedVersion{eventstore.NoStream, eventstore.Exact(1), eventstore.Exact(5), eventstore.Exact(1 << 63)} {
		_, err := s.Append(ctx, "v-1", expected, event("x"))
		var wrong *eventstore.WrongVersionError
		require.ErrorAs(t, err, &wrong, "expected %s", expected)
		assert.Equal(t, eventstore.WrongVersionError{Stream: "v-1", Expected: expected, Actual: eventstore.Exact(2)}, *wrong)
	}
}

func TestOpenRefusesTransactionIDsFromAnotherCluster(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, postgres.Options{})
	require.NoError(t, s.Close())
	// As after a pg_dump of a cluster that had run far more transactions.
	_, err := newPoolOnce(t).Exec(ctx, fmt.Sprintf(`INSERT INTO %s.events (tx_id, stream, version, event_id, type, schema_version, data)
		VALUES ('999999999999'::xid8, 'restored-1', 0, gen_random_uuid(), 't', 1, '')`, pgx.Identifier{s.Schema()}.Sanitize()))
	require.NoError(t, err)
	_, err = postgres.Open(ctx, server.URL, postgres.Options{Schema: s.Schema()})
	require.ErrorIs(t, err, postgres.ErrForeignTransactionIDs)
	assert.Contains(t, err.Error(), "999999999999")
}
