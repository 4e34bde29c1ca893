package sqlite

import (
	"errors"
	"log/slog"
	"sync/atomic"

	zs "zombiezen.com/go/sqlite"

	"github.com/cairn-es/cairn/eventstore"
)

// checkpointer copies the write-ahead log back into the database file on a
// goroutine and a connection of its own.
//
// SQLite checkpoints on its own inside the commit that takes the log past
// a threshold: that commit, and the append waiting on it, then waits for
// the copy and for the syncs of both files. Measured here with
// synchronous=NORMAL, that was a fifth of the mean time of an append, in
// which the process did nothing but wait for the disk. The writer's
// connections therefore checkpoint only past a backstop that this
// goroutine keeps the log below: a PASSIVE checkpoint, which never blocks
// the writer or a reader, every few commits, as many as write about
// checkpointFrames pages to the log.
type checkpointer struct {
	w     *writer // runs the last checkpoint of a catch-up
	conn  *zs.Conn
	stmt  *zs.Stmt // PRAGMA wal_checkpoint(PASSIVE)
	log   *slog.Logger
	path  string
	nudge chan struct{} // capacity 1: a pending checkpoint
	stop  chan struct{}
	// exited is closed when the goroutine has returned.
	exited chan struct{}
	// commits counts the commits since the last checkpoint began; every is
	// how many make one due.
	commits, every atomic.Int64
	// runs counts the checkpoints that ran, and frames is what the last
	// one found in the log: tests look at them.
	runs, frames atomic.Int64
}

const (
	// checkpointFrames is how many pages the log holds when a checkpoint
	// is due: SQLite's own default threshold.
	checkpointFrames = 1000
	// backstopFrames is the threshold at which the writer's connections
	// checkpoint on their own, should this goroutine fall behind.
	backstopFrames = 4 * checkpointFrames
	// firstEvery is how many commits make the first checkpoint due, before
	// any checkpoint has measured how many pages a commit writes.
	firstEvery = 64
)

// openCheckpointer opens the checkpointer's connection on the file that
// Open has already put in WAL mode, and starts its goroutine.
func openCheckpointer(abs string, opts Options) (*checkpointer, error) {
	conn, err := zs.OpenConn(abs, zs.OpenReadWrite)
	if err != nil {
		return nil, err
	}
	// A lock held by another process is waited for as long as the
	// writer's connections wait, no longer; and close interrupts a
	// checkpoint under way rather than wait for it.
	conn.SetBusyTimeout(opts.BusyTimeout)
	stmt, err := conn.Prepare("PRAGMA wal_checkpoint(PASSIVE)")
	if err != nil {
		conn.Close()
		return nil, err
	}
	c := &checkpointer{conn: conn, stmt: stmt, log: opts.Logger, path: abs,
		nudge: make(chan struct{}, 1), stop: make(chan struct{}), exited: make(chan struct{})}
	conn.SetInterrupt(c.stop)
	c.every.Store(firstEvery)
	go c.loop()
	return c, nil
}

// committed counts a commit, and wakes the goroutine when a checkpoint is
// due. It never waits.
func (c *checkpointer) committed() {
	if c.commits.Add(1) >= c.every.Load() {
		select {
		case c.nudge <- struct{}{}:
		default:
		}
	}
}

func (c *checkpointer) loop() {
	defer close(c.exited)
	failing := false
	var last int64 // the frames the log held at the last checkpoint
	for {
		select {
		case <-c.stop:
			return
		case <-c.nudge:
		}
		commits := c.commits.Swap(0)
		frames, err := c.catchUp()
		select {
		case <-c.stop:
			return // closing: an interrupted checkpoint is no failure
		default:
		}
		switch {
		case errors.Is(err, errCheckpointBusy) || zs.ErrCode(err) == zs.ResultBusy, errors.Is(err, eventstore.ErrClosed):
			// Another connection (another process's) is checkpointing, or
			// the writer has closed.
		case err != nil:
			if !failing {
				c.log.Warn("sqlite: background checkpoint failed; commits checkpoint past the backstop",
					slog.String("path", c.path), slog.Int("backstop_pages", backstopFrames), slog.Any("error", err))
			}
			failing = true
		default:
			failing = false
			c.runs.Add(1)
			c.frames.Store(frames)
			grown := frames - last
			if frames < last { // the log started over since
				grown = frames
			}
			c.pace(commits, grown)
			last = frames
		}
	}
}

// catchUp checkpoints until the log is copied whole, and returns how many
// frames the log held at the first checkpoint.
//
// The log starts again from its first frame at the first commit after a
// checkpoint that copied all of it; until then it grows, and every page
// read looks through it. Commits made while a checkpoint copies are left
// to the next, which has fewer to copy: a round or two catch up with a
// busy writer, and a last one, with the writer paused, copies the few
// frames left (see pausedCheckpoint). A reader that still needs the older
// frames keeps them from being copied: the next due checkpoint tries again.
func (c *checkpointer) catchUp() (frames int64, err error) {
	frames, copied, err := c.checkpoint()
	paused := false
	for round := 2; err == nil; round++ {
		if paused || round == catchUpRounds {
			j := &pausedCheckpoint{c: c, done: make(chan error, 1)}
			if err = c.w.submit(j, false); err == nil {
				err = <-j.done
			}
			return frames, err
		}
		log, now, err := c.checkpoint()
		if err != nil || now == copied || log < copied {
			// Nothing came since (the log is copied whole), a reader holds
			// the rest, or the log has started over.
			return frames, err
		}
		// A checkpoint copies the log as it was when it began: what the
		// last one left is what came while it copied.
		paused = log-copied <= pausedFrames
		copied = now
	}
	return frames, err
}

const (
	// catchUpRounds bounds the checkpoints of one catchUp, the last of
	// them with the writer paused.
	catchUpRounds = 3
	// pausedFrames is how many frames a round may leave for the last.
	pausedFrames = 128
)

// pausedCheckpoint is the last checkpoint of a catchUp, a job that the
// writer runs alone, so that no commit adds to the log while it copies
// the rest.
type pausedCheckpoint struct {
	handoff
	c    *checkpointer
	done chan error
}

func (j *pausedCheckpoint) run(*writeTx) error {
	return errors.New("sqlite: internal error: a checkpoint was put in a shared transaction")
}

func (j *pausedCheckpoint) runAlone(*writer) {
	_, _, err := j.c.checkpoint()
	j.done <- err
}

func (j *pausedCheckpoint) finish(err error) { j.done <- err }

// checkpoint runs a PASSIVE checkpoint and returns how many frames the log
// held and how many of them are now copied.
func (c *checkpointer) checkpoint() (frames, copied int64, err error) {
	defer c.stmt.Reset()
	row, err := c.stmt.Step()
	if err != nil || !row {
		return 0, 0, err
	}
	// The row is (busy, frames in the log, frames checkpointed), busy set
	// (and -1 frames) when another connection checkpoints.
	if c.stmt.ColumnInt64(0) != 0 {
		return 0, 0, errCheckpointBusy
	}
	return c.stmt.ColumnInt64(1), c.stmt.ColumnInt64(2), nil
}

// pace sets how many commits make the next checkpoint due, from how many
// frames the last commits added to the log: so that the next finds about
// checkpointFrames more.
func (c *checkpointer) pace(commits, grown int64) {
	if commits <= 0 || grown <= 0 {
		return
	}
	perCommit := max(grown/commits, 1)
	c.every.Store(min(max(checkpointFrames/perCommit, 1), checkpointFrames))
}

// errCheckpointBusy is a checkpoint that did not run: another connection
// (another process's) was checkpointing.
var errCheckpointBusy = errors.New("sqlite: another connection is checkpointing")

// close stops the goroutine and closes the connection.
func (c *checkpointer) close() error {
	close(c.stop)
	<-c.exited
	return c.conn.Close()
}
