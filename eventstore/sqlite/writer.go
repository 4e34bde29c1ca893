package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-es/cairn/eventstore"
)

// job is one unit of work for the writer: an append, a write of the
// consumer and aggregate tables, or (a soloJob) a projection's transaction.
// It runs inside the writer's transaction, in a
// savepoint of its own, so that its failure undoes only its own writes.
// (Groups made only of appends take a faster road: see commitAppends.)
type job interface {
	// run does the work. An error rolls back the job's savepoint and is the
	// job's outcome.
	run(tx *writeTx) error
	// finish reports the outcome once the transaction has committed (err
	// nil), or failed (err says why), and wakes the caller.
	finish(err error)
	// claim is called, under the writer's lock, when the writer takes the
	// job; it returns false when the caller has given up on it.
	claim() bool
}

// handoff is the one protocol by which a job passes from its caller to the
// writer: the writer claims the job when it takes it, and a caller whose
// ctx ends first abandons it, so that the writer skips it. Whichever comes
// first under the writer's lock wins: an abandoned job never runs, and a
// claimed one always completes. Jobs embed it for their claim method.
type handoff struct {
	// claimed and abandoned are guarded by the writer's lock.
	claimed, abandoned bool
}

func (h *handoff) claim() bool {
	if h.abandoned {
		return false
	}
	h.claimed = true
	return true
}

// await waits for the writer's word on a submitted job (ready) or for ctx
// to end. When ctx ends before the writer claimed the job, the job is
// abandoned, nothing of it is written, and await returns ctx.Err(); once
// claimed, the job completes whatever ctx does, and await waits for its
// word.
func await[T any](ctx context.Context, w *writer, h *handoff, ready <-chan T) (T, error) {
	select {
	case v := <-ready:
		return v, nil
	case <-ctx.Done():
	}
	abandoned := false
	w.locked(func() {
		if !h.claimed {
			h.abandoned, abandoned = true, true
		}
	})
	if abandoned {
		var zero T
		return zero, ctx.Err()
	}
	return <-ready, nil
}

// writer owns the connections that write, and commits one transaction at a
// time. While a commit runs, callers queue jobs; the writer goroutine then
// takes all that are queued at that moment, runs them in one BEGIN
// IMMEDIATE transaction and commits once, so concurrent appenders share one
// fsync. A job that finds the writer idle commits at once on its caller's
// goroutine (see submit): batching adds no wait.
type writer struct {
	db      *sql.DB
	conn    *sql.Conn
	appends *appendConn // for groups made only of appends
	// checkpoints copies the log into the file, off the commits' path
	// (nil for a read-only store's writer, which commits nothing).
	checkpoints *checkpointer
	tx          writeTx

	mu    sync.Mutex
	queue []job
	spare []job
	group []*appendJob
	// streams is commitAppends' map of the group's streams, kept empty
	// between groups so that a group does not make its own.
	streams map[string]*groupStream
	busy    bool // a commit runs, on the writer goroutine or a caller's
	// lastGroup is the number of jobs the last commit carried. After a
	// group, its appenders are about to append again: a job that came
	// first and committed alone would leave the others a smaller group.
	lastGroup int
	closed    bool
	wake      chan struct{} // capacity 1: a pending wake-up
	exited    chan struct{}

	committed func() // wakes subscribers after a commit

	// current is the InTx whose transaction is open, for AppendTx to check
	// that it was given that transaction.
	current atomic.Pointer[txJob]

	// commits and jobs count transactions and the jobs they carried, so
	// tests can see group commit at work.
	commits, jobs atomic.Int64

	// refuse, when set, is what every job gets: the store was opened
	// read-only and the writer has no connection.
	refuse error
}

// soloJob is a job that needs a transaction of its own rather than a
// savepoint in a group: InTx hands its caller a *sql.Tx, which database/sql
// must begin itself.
type soloJob interface {
	job
	// runAlone runs the job in its own transaction on conn, and reports.
	runAlone(w *writer)
}

// execer is what jobs write through: the writer's connection, or the
// *sql.Tx of an InTx.
type execer interface {
	querier
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// writeTx is what a job sees of the transaction: the writer's connection
// and the time of the commit.
type writeTx struct {
	conn execer
	now  time.Time
	args []any // reused across inserts
}

const (
	sqlLastVersion = `SELECT NULL, version FROM cairn_events WHERE stream = ? ORDER BY version DESC LIMIT 1`
	sqlInsert      = `INSERT INTO cairn_events (stream, version, id, type, schema_version, data,
		correlation_id, causation_id, command_id, extra, recorded_at, derived_id) VALUES ` + insertRow
	sqlPositionAt = `SELECT position FROM cairn_events WHERE stream = ? AND version = ?`
)

func newWriter(db *sql.DB, conn *sql.Conn, appends *appendConn, checkpoints *checkpointer, committed func()) *writer {
	w := &writer{
		db:          db,
		conn:        conn,
		appends:     appends,
		checkpoints: checkpoints,
		wake:        make(chan struct{}, 1),
		exited:      make(chan struct{}),
		committed:   committed,
	}
	w.tx.conn = conn
	checkpoints.w = w
	go w.loop()
	return w
}

// refusingWriter is the writer of a read-only store: it has no connection
// and fails every job with refuse.
func refusingWriter(refuse error) *writer {
	w := &writer{refuse: refuse, wake: make(chan struct{}, 1), exited: make(chan struct{})}
	close(w.exited) // no loop runs
	return w
}

// submit hands j to the writer, or fails with [eventstore.ErrClosed].
// With inline set, a job that finds the writer idle commits at once on the
// caller's goroutine: handing a lone append to the writer goroutine and its
// outcome back costs two goroutine wake-ups, a tenth of an append's time
// here. Otherwise, and always under load, j queues for the writer
// goroutine's next group. A soloJob is never inline: InTx needs the writer
// goroutine to hold its transaction while its caller runs.
func (w *writer) submit(j job, inline bool) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return eventstore.ErrClosed
	}
	if w.refuse != nil {
		w.mu.Unlock()
		return w.refuse
	}
	if !inline || w.busy || len(w.queue) > 0 || w.lastGroup > 1 {
		w.queue = append(w.queue, j)
		w.mu.Unlock()
		w.signal()
		return nil
	}
	w.busy = true
	j.claim()
	batch := append(w.spare[:0], j)
	w.mu.Unlock()
	committed := false
	defer func() {
		if !committed {
			// A panic on the caller's goroutine, which may recover it:
			// leave the store usable.
			w.leaveTx()
		}
		w.release(batch)
	}()
	w.commit(batch)
	committed = true
	return nil
}

// signal wakes the writer goroutine, if it is not awake already.
func (w *writer) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// release ends a commit: the writer is idle again, and the goroutine is
// woken if jobs queued meanwhile or the writer is closing.
func (w *writer) release(batch []job) {
	clear(batch)
	w.mu.Lock()
	w.spare = batch[:0]
	w.lastGroup = len(batch)
	w.busy = false
	pending := len(w.queue) > 0 || w.closed
	w.mu.Unlock()
	if pending {
		w.signal()
	}
}

// locked runs f under the writer's lock, which also guards the jobs' claim
// state.
func (w *writer) locked(f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f()
}

func (w *writer) loop() {
	defer close(w.exited)
	for {
		batch, ok := w.take()
		if !ok {
			return
		}
		w.commit(batch)
		w.release(batch)
		if len(batch) > 1 {
			// Appenders are waiting to be told their outcome and will append
			// again at once: let them queue, so that the next group holds
			// them all rather than whoever was quicker. With one appender
			// this never runs, and nothing waits.
			runtime.Gosched()
		}
	}
}

// take waits until jobs are queued and no commit runs, and claims all of
// them; it returns false once the writer is closed and idle.
func (w *writer) take() ([]job, bool) {
	for {
		w.mu.Lock()
		if len(w.queue) > 0 && !w.busy {
			batch := w.spare[:0]
			for _, j := range w.queue {
				if j.claim() {
					batch = append(batch, j)
				}
			}
			clear(w.queue)
			w.queue = w.queue[:0]
			if len(batch) > 0 {
				w.busy = true
				w.mu.Unlock()
				return batch, true
			}
			w.mu.Unlock()
			continue
		}
		if w.closed && !w.busy {
			w.mu.Unlock()
			return nil, false
		}
		w.mu.Unlock()
		<-w.wake
	}
}

// commit runs the jobs of batch that can share a transaction in one, then
// each solo job in its own.
func (w *writer) commit(batch []job) {
	var solos []soloJob
	shared := batch[:0:len(batch)]
	for _, j := range batch {
		if s, ok := j.(soloJob); ok {
			solos = append(solos, s)
		} else {
			shared = append(shared, j)
		}
	}
	if len(shared) > 0 {
		w.commitShared(shared)
	}
	for _, s := range solos {
		s.runAlone(w)
	}
}

// commitShared runs batch in one transaction and reports to every job.
func (w *writer) commitShared(batch []job) {
	w.tx.now = time.Now()
	group, ok := allAppends(batch, w.group[:0])
	if !ok || w.appends == nil {
		w.commitEach(batch)
		return
	}
	w.group = group
	defer clear(group)
	c := w.appends
	if err := step(c.begin); err != nil {
		// Most likely another process holds the write lock, and has for
		// the whole busy timeout: the fallback would wait as long again.
		w.leaveTx()
		for _, j := range group {
			j.finish(fmt.Errorf("sqlite: begin the write transaction: %w", err))
		}
		return
	}
	err := w.commitAppends(c, group)
	if err == nil {
		err = step(c.commit)
	}
	if err == nil {
		w.done(len(batch))
		for _, j := range group {
			j.finish(j.err)
		}
		return
	}
	w.leaveTx()
	for _, j := range group {
		j.result, j.err = eventstore.AppendResult{}, nil
	}
	// Run the group again on the database/sql connection, one savepoint per
	// append, so that what failed fails only the append it belongs to, and
	// errors read as they do everywhere else.
	w.commitEach(batch)
}

// leaveTx rolls back whatever transaction a failed or interrupted commit
// left open on either connection: one left open would keep the file's
// write lock and fail every later commit. If the append connection cannot
// leave its transaction, the writer stops using it and commits everything
// on the database/sql connection.
func (w *writer) leaveTx() {
	if c := w.appends; c != nil && !c.conn.AutocommitEnabled() {
		if err := step(c.rollback); err != nil || !c.conn.AutocommitEnabled() {
			_ = c.close()
			w.appends = nil
		}
	}
	// Outside a transaction ROLLBACK fails harmlessly.
	_, _ = w.conn.ExecContext(noInterrupt, "ROLLBACK")
}

// allAppends returns the batch as appends, if that is all it holds.
func allAppends(batch []job, appends []*appendJob) ([]*appendJob, bool) {
	for _, j := range batch {
		a, ok := j.(*appendJob)
		if !ok {
			return appends, false
		}
		appends = append(appends, a)
	}
	return appends, true
}

// done counts a commit and wakes subscribers and the checkpointer.
func (w *writer) done(jobs int) {
	w.committed()
	if w.checkpoints != nil {
		w.checkpoints.committed()
	}
	w.commits.Add(1)
	w.jobs.Add(int64(jobs))
}

// commitEach runs each job of batch in a savepoint of its own, so that a job
// that fails is undone alone.
func (w *writer) commitEach(batch []job) {
	ctx := context.Background()
	tx := &w.tx
	outcomes := make([]error, len(batch))
	fail := func(err error) {
		for i, j := range batch {
			if outcomes[i] == nil {
				j.finish(err)
			} else {
				j.finish(outcomes[i])
			}
		}
	}
	if _, err := w.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		fail(fmt.Errorf("sqlite: begin the write transaction: %w", err))
		return
	}
	abort := func(err error) {
		_, _ = w.conn.ExecContext(ctx, "ROLLBACK")
		fail(err)
	}
	if len(batch) == 1 {
		// Alone, a job needs no savepoint: its failure rolls back everything.
		if err := batch[0].run(tx); err != nil {
			abort(err)
			return
		}
	} else {
		// Savepoints nest until the commit; ROLLBACK TO undoes the latest
		// one of the name, this job's. Releasing each would cost a statement.
		for i, j := range batch {
			if _, err := w.conn.ExecContext(ctx, "SAVEPOINT job"); err != nil {
				abort(fmt.Errorf("sqlite: open a savepoint: %w", err))
				return
			}
			if err := j.run(tx); err != nil {
				outcomes[i] = err
				if _, rerr := w.conn.ExecContext(ctx, "ROLLBACK TO job"); rerr != nil {
					// SQLite rolled back the whole transaction (disk full, I/O
					// error): nothing in it was written.
					abort(fmt.Errorf("sqlite: write transaction lost after %w: %w", err, rerr))
					return
				}
			}
		}
	}
	if _, err := w.conn.ExecContext(ctx, "COMMIT"); err != nil {
		abort(fmt.Errorf("sqlite: commit: %w", err))
		return
	}
	w.done(len(batch))
	for i, j := range batch {
		j.finish(outcomes[i])
	}
}

// close fails the jobs still queued with [eventstore.ErrClosed], waits for
// the batch being committed, and closes the connection.
func (w *writer) close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		<-w.exited
		return nil
	}
	w.closed = true
	pending := w.queue
	w.queue = nil
	var dropped []job
	for _, j := range pending {
		if j.claim() {
			dropped = append(dropped, j)
		}
	}
	w.mu.Unlock()
	for _, j := range dropped {
		j.finish(eventstore.ErrClosed)
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
	<-w.exited
	var errs []error
	if w.checkpoints != nil {
		errs = append(errs, w.checkpoints.close())
	}
	if w.appends != nil {
		errs = append(errs, w.appends.close())
	}
	if w.conn != nil {
		errs = append(errs, w.conn.Close(), w.db.Close())
	}
	return errors.Join(errs...)
}
