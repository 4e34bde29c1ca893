package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
)

func openTest(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "events.db"), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// gate is a job that holds the writer until it is opened, so that a test
// can queue appends and have the writer take them as one group.
type gate struct {
	started, open chan struct{}
	claimed       bool
}

func newGate() *gate { return &gate{started: make(chan struct{}), open: make(chan struct{})} }

func (g *gate) run(*writeTx) error {
	close(g.started)
	<-g.open
	return nil
}
func (g *gate) finish(error) {}
func (g *gate) claim() bool  { g.claimed = true; return true }

// holdWriter blocks the writer and returns a function that releases it.
func holdWriter(t *testing.T, s *Store) (release func()) {
	t.Helper()
	g := newGate()
	require.NoError(t, s.w.submit(g, false))
	<-g.started
	return sync.OnceFunc(func() { close(g.open) })
}

// queued waits until n jobs wait in the writer's queue.
func queued(t *testing.T, s *Store, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		var got int
		s.w.locked(func() { got = len(s.w.queue) })
		return got == n
	}, 10*time.Second, time.Millisecond)
}

type outcome struct {
	res eventstore.AppendResult
	err error
}

func appendAsync(ctx context.Context, s *Store, stream string, expected eventstore.ExpectedVersion, evs ...eventstore.EventData) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		r, err := s.Append(ctx, stream, expected, evs...)
		ch <- outcome{r, err}
	}()
	return ch
}

func ev(typ string) eventstore.EventData { return eventstore.EventData{Type: typ, Data: []byte(`{}`)} }

// noop is a job that is not an append: a group holding one runs every job
// in a savepoint of its own.
type noop struct{}

func (noop) run(*writeTx) error { return nil }
func (noop) finish(error)       {}
func (noop) claim() bool        { return true }

// Appends gathered into one transaction are checked one after the other: a
// later one sees the earlier ones' events, and a failing one fails alone.
// Both roads are tested: appends only (checked in memory), and a group
// with another job (a savepoint per job).
func TestGroupChecksAppendsInOrder(t *testing.T) {
	for _, mixed := range []bool{false, true} {
		t.Run(fmt.Sprint("mixed=", mixed), func(t *testing.T) { testGroupOrder(t, mixed) })
	}
}

func testGroupOrder(t *testing.T, mixed bool) {
	s := openTest(t)
	release := holdWriter(t, s)
	ctx := context.Background()
	repeated := ev("b")
	repeated.ID = eventstore.NewEventID()
	first := appendAsync(ctx, s, "order-1", eventstore.NoStream, ev("a"), repeated)
	queued(t, s, 1)
	second := appendAsync(ctx, s, "order-1", eventstore.Exact(1), ev("c"))
	queued(t, s, 2)
	conflict := appendAsync(ctx, s, "order-1", eventstore.NoStream, ev("lost"))
	queued(t, s, 3)
	other := appendAsync(ctx, s, "order-2", eventstore.Any, ev("d"))
	queued(t, s, 4)
	// Repeats the second event of the first append, in the same group:
	// the first append is not committed yet, but this one must see it and
	// write nothing.
	partial := appendAsync(ctx, s, "order-1", eventstore.Any, repeated)
	queued(t, s, 5)
	if mixed {
		require.NoError(t, s.w.submit(noop{}, false))
		queued(t, s, 6)
	}
	commits := s.w.commits.Load()
	release()

	o := <-first
	require.NoError(t, o.err)
	assert.Equal(t, eventstore.AppendResult{FirstVersion: 0, LastVersion: 1, Position: eventstore.Position{Major: 2}}, o.res)
	o = <-second
	require.NoError(t, o.err, "the second append must see the first's events")
	assert.Equal(t, eventstore.AppendResult{FirstVersion: 2, LastVersion: 2, Position: eventstore.Position{Major: 3}}, o.res)
	o = <-conflict
	var wv *eventstore.WrongVersionError
	require.ErrorAs(t, o.err, &wv)
	assert.Equal(t, eventstore.Exact(2), wv.Actual)
	o = <-other
	require.NoError(t, o.err, "a conflict fails only its own append")
	assert.Equal(t, eventstore.Position{Major: 4}, o.res.Position, "positions stay dense around the failed append")
	o = <-partial
	require.NoError(t, o.err)
	assert.Equal(t, eventstore.AppendResult{FirstVersion: 1, LastVersion: 1, Position: eventstore.Position{Major: 2}, Duplicate: true},
		o.res, "a repeat of what the group has just written")
	assert.Equal(t, commits+2, s.w.commits.Load(), "the gate's commit, then one for the group")

	var types []string
	for e, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		require.NoError(t, err)
		types = append(types, e.Type)
	}
	assert.Equal(t, []string{"a", "b", "c", "d"}, types)
}

// An append whose context ends while it waits for the writer is not written.
func TestCanceledWhileQueued(t *testing.T) {
	s := openTest(t)
	release := holdWriter(t, s)
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	canceled := appendAsync(ctx, s, "order-1", eventstore.Any, ev("never"))
	queued(t, s, 1)
	kept := appendAsync(context.Background(), s, "order-1", eventstore.Any, ev("kept"))
	queued(t, s, 2)
	cancel()
	o := <-canceled
	require.ErrorIs(t, o.err, context.Canceled)
	release()
	o = <-kept
	require.NoError(t, o.err)
	assert.Equal(t, uint64(0), o.res.FirstVersion, "the canceled append wrote nothing")
}

// Close fails the appends still queued and lets the running group finish.
func TestCloseFailsQueuedAppends(t *testing.T) {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "events.db"), Options{})
	require.NoError(t, err)
	release := holdWriter(t, s)
	queuedAppend := appendAsync(context.Background(), s, "order-1", eventstore.Any, ev("x"))
	queued(t, s, 1)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	o := <-queuedAppend
	require.ErrorIs(t, o.err, eventstore.ErrClosed)
	release()
	require.NoError(t, <-closed)
	_, err = s.Append(context.Background(), "order-1", eventstore.Any, ev("x"))
	require.ErrorIs(t, err, eventstore.ErrClosed)
	for _, err := range s.ReadStream(context.Background(), "order-1", eventstore.Forward(0)) {
		require.ErrorIs(t, err, eventstore.ErrClosed)
	}
	require.NoError(t, s.Close(), "Close is idempotent")
}

// Concurrent appenders share commits: that is what lets them go past the
// disk's fsync rate.
func TestConcurrentAppendsShareCommits(t *testing.T) {
	s := openTest(t)
	release := holdWriter(t, s)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Append(context.Background(), fmt.Sprint("order-", i), eventstore.NoStream, ev("x"))
			assert.NoError(t, err)
		}()
	}
	queued(t, s, 16)
	before := s.w.commits.Load()
	release()
	wg.Wait()
	assert.Equal(t, before+2, s.w.commits.Load(), "the gate's commit, then one for the 16 queued appends")
}

// When SQLite fails a write, the group is run again a savepoint per append,
// and only the append that the failure belongs to fails.
func TestWriteFailureStaysWithItsAppend(t *testing.T) {
	s := openTest(t)
	db, err := sql.Open("sqlite", s.Path())
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TRIGGER poison BEFORE INSERT ON cairn_events WHEN NEW.stream = 'poison'
		BEGIN SELECT RAISE(ABORT, 'poisoned stream'); END`)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	release := holdWriter(t, s)
	ctx := context.Background()
	before := appendAsync(ctx, s, "order-1", eventstore.NoStream, ev("a"))
	queued(t, s, 1)
	poisoned := appendAsync(ctx, s, "poison", eventstore.Any, ev("b"), ev("c"))
	queued(t, s, 2)
	after := appendAsync(ctx, s, "order-1", eventstore.Exact(0), ev("d"))
	queued(t, s, 3)
	release()

	o := <-before
	require.NoError(t, o.err)
	assert.Equal(t, eventstore.Position{Major: 1}, o.res.Position)
	o = <-poisoned
	require.Error(t, o.err)
	assert.Contains(t, o.err.Error(), "poisoned stream")
	assert.Contains(t, o.err.Error(), `"poison"`, "the error names the stream")
	o = <-after
	require.NoError(t, o.err)
	assert.Equal(t, eventstore.Position{Major: 2}, o.res.Position, "positions stay dense")
	var n int
	for _, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		require.NoError(t, err)
		n++
	}
	assert.Equal(t, 2, n)
}

// While another connection holds the file's write lock, an append waits
// the busy timeout once, fails with nothing written, and the next append
// after the lock is released succeeds.
func TestAppendWhileAnotherHoldsTheLock(t *testing.T) {
	const busy = time.Second
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "events.db"), Options{BusyTimeout: busy})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	db, err := sql.Open("sqlite", s.Path())
	require.NoError(t, err)
	defer db.Close()
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	_, err = conn.ExecContext(ctx, "BEGIN IMMEDIATE")
	require.NoError(t, err)

	start := time.Now()
	_, err = s.Append(ctx, "order-1", eventstore.NoStream, ev("a"))
	waited := time.Since(start)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "begin the write transaction")
	assert.Less(t, waited, 2*busy-busy/10, "the busy timeout is waited once, not again by the fallback")

	_, err = conn.ExecContext(ctx, "ROLLBACK")
	require.NoError(t, err)
	require.NoError(t, conn.Close())
	res, err := s.Append(ctx, "order-1", eventstore.NoStream, ev("b"))
	require.NoError(t, err)
	assert.Equal(t, eventstore.Position{Major: 1}, res.Position, "the failed append wrote nothing")
}

// A panic inside a commit that runs on the caller's goroutine, which the
// caller recovers (as net/http does), rolls the transaction back and
// leaves the store usable.
func TestPanicInInlineCommitLeavesStoreUsable(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	func() {
		defer func() { assert.Equal(t, "boom", recover()) }()
		_ = s.write(ctx, func(tx *writeTx) error {
			_, err := tx.conn.ExecContext(ctx, `INSERT INTO cairn_leases (name, holder, fence) VALUES ('x', 'y', 1)`)
			require.NoError(t, err)
			panic("boom")
		})
	}()
	res, err := s.Append(ctx, "order-1", eventstore.NoStream, ev("a"))
	require.NoError(t, err)
	assert.Equal(t, eventstore.Position{Major: 1}, res.Position)
	var leases int
	require.NoError(t, s.readers.QueryRowContext(ctx, `SELECT count(*) FROM cairn_leases`).Scan(&leases))
	assert.Zero(t, leases, "the panicking job's write was rolled back")
	require.NoError(t, s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error { return nil }))
}
