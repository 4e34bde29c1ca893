package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

var (
	_ storekit.CheckpointStore            = (*Store)(nil)
	_ storekit.TxCheckpointStore[*sql.Tx] = (*Store)(nil)
)

// InTx implements [storekit.TxCheckpointStore.InTx]: fn runs in a
// transaction of the store's one writer connection, which commits when fn
// returns nil. Read models kept in the store's file, written through tx,
// commit with the checkpoint that [Store.SaveCheckpointTx] moves, or not at
// all; events appended with [Store.AppendTx] commit with them too, and wake
// subscribers once committed.
//
// The transaction is the writer's, as it must be in SQLite, which has one
// writer per file: appends and other writes of this store wait while fn
// runs (and other processes' writers wait up to their busy timeout), so
// keep fn short. Inside fn, write only through tx: Append, SaveCheckpoint
// and the other writes of this store would wait for fn itself. They
// return [ErrInTx] when given fn's ctx; with another ctx they deadlock.
//
// fn's error is returned as it is, after the rollback. When fn panics, the
// transaction is rolled back and the panic goes on. If ctx ends before the
// writer is free, fn does not run and InTx returns ctx.Err(). Statements
// that fn runs with its ctx are interrupted when ctx ends, and fail.
func (s *Store) InTx(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.notInTx(ctx); err != nil {
		return err
	}
	j := &txJob{
		w:       s.w,
		began:   make(chan error, 1),
		verdict: make(chan bool, 1),
		done:    make(chan error, 1),
	}
	if err := s.w.submit(j, false); err != nil {
		return err
	}
	began, err := await(ctx, s.w, &j.handoff, j.began)
	if err != nil {
		return err
	}
	if began != nil {
		return s.fileFailure("begin a transaction", began)
	}
	decided := false
	defer func() {
		if !decided {
			// fn panicked or called runtime.Goexit: free the writer, and let
			// the panic go on.
			j.verdict <- false
			<-j.done
		}
	}()
	if err := ctx.Err(); err != nil {
		decided = true
		j.verdict <- false
		<-j.done
		return err
	}
	ferr := fn(context.WithValue(ctx, inTxKey{}, j), j.tx)
	decided = true
	j.verdict <- ferr == nil
	cerr := <-j.done
	if ferr != nil {
		return ferr
	}
	return s.fileFailure("commit a transaction", cerr)
}

// txJob is an InTx: the writer begins its transaction and hands it to the
// caller, which runs fn on its own goroutine (so that a panic or a failed
// test unwinds the caller, not the writer) and says whether to commit.
type txJob struct {
	w *writer

	handoff

	tx       *sql.Tx
	began    chan error // writer to caller: tx is ready, or why not
	verdict  chan bool  // caller to writer: commit?
	done     chan error // writer to caller: the commit's outcome
	appended atomic.Bool
}

// finish reports a job that never ran: the store closed while it waited.
func (j *txJob) finish(err error) { j.began <- err }

// run is never called: the writer runs a soloJob through runAlone.
func (j *txJob) run(*writeTx) error {
	return errors.New("sqlite: internal error: an InTx job was put in a shared transaction")
}

func (j *txJob) runAlone(w *writer) {
	// A context that never ends: database/sql would roll the transaction
	// back on its own when it did, behind the writer's back (see
	// noInterrupt).
	tx, err := w.conn.BeginTx(noInterrupt, nil)
	if err != nil {
		j.began <- fmt.Errorf("sqlite: begin a transaction: %w", err)
		return
	}
	j.tx = tx
	w.current.Store(j)
	j.began <- nil
	commit := <-j.verdict
	w.current.Store(nil)
	if !commit {
		if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
			// Make sure the connection leaves the transaction.
			_, _ = w.conn.ExecContext(noInterrupt, "ROLLBACK")
		}
		j.done <- nil
		return
	}
	if err := tx.Commit(); err != nil {
		_, _ = w.conn.ExecContext(noInterrupt, "ROLLBACK")
		j.done <- fmt.Errorf("sqlite: commit a transaction: %w", err)
		return
	}
	if j.appended.Load() {
		w.done(1)
	} else {
		w.commits.Add(1)
		w.jobs.Add(1)
	}
	j.done <- nil
}

// errForeignTx reports a transaction that is not the one open in this
// store's InTx.
var errForeignTx = errors.New("sqlite: the transaction is not the one that this store's InTx is running")

// AppendTx appends events inside tx, the transaction of a running
// [Store.InTx] of this store, with the rules of [Store.Append]: the events
// become visible, and subscribers wake, when and only when tx commits. An
// append that fails writes nothing and leaves tx usable.
func (s *Store) AppendTx(ctx context.Context, tx *sql.Tx, stream string, expected eventstore.ExpectedVersion, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	if err := ctx.Err(); err != nil {
		return eventstore.AppendResult{}, err
	}
	cur := s.w.current.Load()
	if tx == nil || cur == nil || cur.tx != tx {
		return eventstore.AppendResult{}, errForeignTx
	}
	j, err := newAppendJob(ctx, stream, expected, events)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	err = savepoint(tx, "append_tx", func() error {
		return j.run(&writeTx{conn: tx, now: time.Now()})
	})
	if err != nil {
		return eventstore.AppendResult{}, s.fileFailure("append to stream "+quote(stream), err)
	}
	if !j.result.Duplicate {
		cur.appended.Store(true)
	}
	return j.result, nil
}

// savepoint runs fn in a savepoint of tx, so that a failure of fn undoes
// only fn's writes.
func savepoint(tx execer, name string, fn func() error) error {
	if _, err := tx.ExecContext(noInterrupt, "SAVEPOINT "+name); err != nil {
		return fmt.Errorf("sqlite: open a savepoint: %w", err)
	}
	if err := fn(); err != nil {
		if _, rerr := tx.ExecContext(noInterrupt, "ROLLBACK TO "+name); rerr != nil {
			return fmt.Errorf("sqlite: transaction lost after %w: %w", err, rerr)
		}
		_, _ = tx.ExecContext(noInterrupt, "RELEASE "+name)
		return err
	}
	if _, err := tx.ExecContext(noInterrupt, "RELEASE "+name); err != nil {
		return fmt.Errorf("sqlite: release a savepoint: %w", err)
	}
	return nil
}

// SaveCheckpointTx implements [storekit.TxCheckpointStore.SaveCheckpointTx].
// The move is visible to others when tx commits.
func (s *Store) SaveCheckpointTx(ctx context.Context, tx *sql.Tx, name string, expected, next eventstore.Position, fence storekit.Fence) error {
	if err := storekit.ValidateConsumerName(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if tx == nil {
		return errNilTx
	}
	return saveCheckpoint(tx, name, expected, next, fence)
}

// DeleteDeadLetterTx implements [storekit.TxCheckpointStore.DeleteDeadLetterTx].
func (s *Store) DeleteDeadLetterTx(ctx context.Context, tx *sql.Tx, consumer, id string) error {
	if err := storekit.ValidateConsumerName(consumer); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if tx == nil {
		return errNilTx
	}
	return deleteDeadLetter(tx, consumer, id)
}

var errNilTx = errors.New("sqlite: nil transaction")
