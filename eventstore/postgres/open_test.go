package postgres_test

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// nowhere is a server address where nothing listens: a store that reached
// for it would fail to connect, not refuse the schema name.
const nowhere = "postgres://cairn@127.0.0.1:1/cairn?connect_timeout=1"

// badSchemaNames are refused before anything reaches a server.
var badSchemaNames = []struct{ name, schema, says string }{
	{"NUL byte", "billing\x00eu", "control character"},
	{"newline", "billing\neu", "control character"},
	{"invalid UTF-8", "billing\xffeu", "not valid UTF-8"},
	{"only spaces", "   ", "white space"},
	{"leading space", " billing", "white space"},
	{"reserved pg_ prefix", "pg_billing", "pg_"},
	{"PostgreSQL's own schema", "information_schema", "PostgreSQL's own"},
	{"41 bytes", strings.Repeat("s", 41), "more than the limit of 40"},
}

// Every bad schema name fails Open and New with an InvalidArgumentError
// that names the argument and quotes the name, without a server: the
// address leads nowhere, so reaching for it would be another error.
func TestBadSchemaNamesAreRefusedWithoutAServer(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, nowhere) // connects lazily: nothing happens
	require.NoError(t, err)
	defer pool.Close()
	for _, c := range badSchemaNames {
		t.Run(c.name, func(t *testing.T) {
			for how, open := range map[string]func() (*postgres.Store, error){
				"Open": func() (*postgres.Store, error) {
					return postgres.Open(ctx, nowhere, postgres.Options{Schema: c.schema})
				},
				"New": func() (*postgres.Store, error) { return postgres.New(ctx, pool, postgres.Options{Schema: c.schema}) },
			} {
				s, err := open()
				require.Nil(t, s, how)
				requireBadSchema(t, err, c.schema, c.says)
			}
		})
	}
}

func requireBadSchema(t *testing.T, err error, schema, says string) {
	t.Helper()
	require.ErrorIs(t, err, eventstore.ErrInvalidArgument)
	var ia *eventstore.InvalidArgumentError
	require.ErrorAs(t, err, &ia)
	assert.Equal(t, "schema name", ia.Field)
	assert.Contains(t, ia.Reason, fmt.Sprintf("%q", schema), "the reason quotes the name")
	assert.Contains(t, ia.Reason, says)
}

// With a server: a bad name is refused and no schema is created; a name
// with spaces, quotes and non-ASCII letters, which the docs allow, works.
func TestSchemaNamesWithAServer(t *testing.T) {
	ctx := context.Background()
	_, err := postgres.Open(ctx, server.URL, postgres.Options{Schema: "pg_cairn"})
	requireBadSchema(t, err, "pg_cairn", "pg_")
	assert.False(t, schemaExists(t, "pg_cairn"))

	odd := `Zürich "EU"` + server.NewSchema(" ") // 11 + 1 + 1 + 12 bytes
	s := newStore(t, postgres.Options{Schema: odd})
	_, err = s.Append(ctx, "order-1", eventstore.NoStream, event("order.placed"))
	require.NoError(t, err)
	assert.True(t, schemaExists(t, odd))
}

// A context already done fails Open and New with the context's error, and
// creates no schema.
func TestOpenWithADoneContext(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	pool := newPoolOnce(t)
	for _, c := range []struct {
		ctx  context.Context
		want error
	}{{canceled, context.Canceled}, {expired, context.DeadlineExceeded}} {
		schema := server.NewSchema("done")
		s, err := postgres.Open(c.ctx, server.URL, postgres.Options{Schema: schema})
		require.ErrorIs(t, err, c.want)
		require.Nil(t, s)
		s, err = postgres.New(c.ctx, pool, postgres.Options{Schema: schema})
		require.ErrorIs(t, err, c.want)
		require.Nil(t, s)
		assert.False(t, schemaExists(t, schema), "a schema was created")
	}
}

// After Close, every read and write returns eventstore.ErrClosed.
func TestClosedStoreRefusesWork(t *testing.T) {
	ctx := context.Background()
	schema := server.NewSchema("closed")
	s, err := postgres.Open(ctx, server.URL, postgres.Options{Schema: schema})
	require.NoError(t, err)
	t.Cleanup(func() { dropSchema(t, schema) })
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close is idempotent")
	first := func(seq func(func(eventstore.Event, error) bool)) error {
		for _, err := range seq {
			return err
		}
		return nil
	}
	for name, f := range map[string]func() error{
		"Append": func() error {
			_, err := s.Append(ctx, "order-1", eventstore.Any, event("x"))
			return err
		},
		"Lag":        func() error { _, err := s.Lag(ctx); return err },
		"ReadStream": func() error { return first(s.ReadStream(ctx, "order-1", eventstore.Forward(0))) },
		"ReadAll":    func() error { return first(s.ReadAll(ctx, eventstore.Start, eventstore.Filter{})) },
		"Subscribe":  func() error { return first(s.Subscribe(ctx, eventstore.Start, eventstore.Filter{})) },
		"Checkpoint": func() error { _, err := s.Checkpoint(ctx, "totals"); return err },
		"SaveCheckpoint": func() error {
			return s.SaveCheckpoint(ctx, "totals", eventstore.Start, eventstore.Position{Major: 1}, 0)
		},
		"SaveSnapshot": func() error {
			return s.SaveSnapshot(ctx, storekit.Snapshot{Stream: "order-1", Type: "order", SchemaVersion: 1, Data: []byte(`{}`)})
		},
		"LoadSnapshot":     func() error { _, _, err := s.LoadSnapshot(ctx, "order-1"); return err },
		"AcquireLease":     func() error { _, _, err := s.AcquireLease(ctx, "totals", "me", time.Minute); return err },
		"CountDeadLetters": func() error { _, err := s.CountDeadLetters(ctx, "totals"); return err },
		"CommandResult":    func() error { _, _, err := s.CommandResult(ctx, "order-1", "cmd-1"); return err },
		"InTx":             func() error { return s.InTx(ctx, func(context.Context, pgx.Tx) error { return nil }) },
	} {
		assert.ErrorIs(t, f(), eventstore.ErrClosed, name)
	}
}

func schemaExists(t *testing.T, schema string) bool {
	t.Helper()
	var n int
	err := newPoolOnce(t).QueryRow(context.Background(), `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, schema).Scan(&n)
	require.NoError(t, err)
	return n > 0
}

// A store opened read-only (the cairn command line's look) neither creates
// nor migrates a schema: a fresh one is refused by name. On an existing
// store it reads, subscribes (LISTEN works in a read-only session: the
// subscriber below is woken by a notification, since its poll would come
// only after the test's deadline), and every write is refused by the server.
func TestReadOnly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	schema := server.NewSchema("readonly")
	_, err := postgres.Open(ctx, server.URL, postgres.Options{Schema: schema, ReadOnly: true})
	require.Error(t, err)
	assert.Contains(t, err.Error(), schema, "the error names the schema")
	assert.False(t, schemaExists(t, schema), "a read-only open created the schema")

	rw := newStore(t, postgres.Options{Schema: schema})
	placed, err := rw.Append(ctx, "order-1", eventstore.NoStream, event("order.placed"))
	require.NoError(t, err)
	ro, err := postgres.Open(ctx, server.URL, postgres.Options{Schema: schema, ReadOnly: true, PollInterval: time.Hour})
	require.NoError(t, err)
	defer func() { require.NoError(t, ro.Close()) }()

	var read []eventstore.Event
	for e, err := range ro.ReadStream(ctx, "order-1", eventstore.Forward(0)) {
		require.NoError(t, err)
		read = append(read, e)
	}
	require.Len(t, read, 1)
	assert.Equal(t, placed.Position, read[0].Position)
	head, err := ro.Head(ctx)
	require.NoError(t, err)
	assert.Equal(t, placed.Position, head)

	d := eventstore.DeadLetter{Consumer: "totals", Event: read[0], Error: "boom", Attempts: 1,
		FirstFailure: time.Now().UTC(), LastFailure: time.Now().UTC()}
	for name, write := range map[string]func() error{
		"Append": func() error {
			_, err := ro.Append(ctx, "order-2", eventstore.NoStream, event("order.placed"))
			return err
		},
		"SaveCheckpoint": func() error {
			return ro.SaveCheckpoint(ctx, "totals", eventstore.Start, placed.Position, 0)
		},
		"AcquireLease":   func() error { _, _, err := ro.AcquireLease(ctx, "totals", "host-1/cli", time.Minute); return err },
		"ParkDeadLetter": func() error { _, err := ro.ParkDeadLetter(ctx, d); return err },
		"SaveSnapshot": func() error {
			return ro.SaveSnapshot(ctx, storekit.Snapshot{Stream: "order-1", Type: "order", SchemaVersion: 1, Data: []byte(`{}`)})
		},
	} {
		err := write()
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "read-only transaction", name)
	}
	cp, err := ro.Checkpoint(ctx, "totals")
	require.NoError(t, err)
	assert.True(t, cp.Position.IsZero(), "nothing was written")

	subCtx, stop := context.WithCancel(ctx)
	defer stop()
	next, done := iter.Pull2(ro.Subscribe(subCtx, placed.Position, eventstore.Filter{}))
	defer done()
	// The first event is appended until it arrives: one appended before
	// the subscriber's LISTEN began would be found only by the hour-long
	// poll. The next ones are appended one at a time, each after the one
	// before arrived, when the subscriber has nothing left to read and
	// waits for a notification.
	first := make(chan struct{})
	var appender sync.WaitGroup
	appender.Go(func() {
		for {
			if _, err := rw.Append(subCtx, "order-1", eventstore.Any, event("order.shipped")); err != nil {
				return
			}
			select {
			case <-first:
				return
			case <-subCtx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	e, err, ok := next()
	close(first)
	appender.Wait()
	require.True(t, ok)
	require.NoError(t, err, "the read-only subscription fails")
	assert.Equal(t, "order.shipped", e.Type)
	for range 2 {
		r, err := rw.Append(ctx, "order-2", eventstore.Any, event("order.paid"))
		require.NoError(t, err)
		for {
			e, err, ok := next()
			require.True(t, ok)
			require.NoError(t, err)
			if e.Position == r.Position {
				break
			}
		}
	}
}
