package sqlite

import (
	"context"
	"errors"
)

// ErrInTx is returned by a write (Append, SaveCheckpoint, a lease or dead
// letter change, InTx itself) called with the context that [Store.InTx]
// passed to its function. The write would wait for the writer, which waits
// for that function to return: the write must go through the function's
// transaction instead ([Store.AppendTx], [Store.SaveCheckpointTx],
// [Store.ParkDeadLetterTx], [Store.DeleteDeadLetterTx]). A write called inside the function with
// another context is not detected and waits forever.
var ErrInTx = errors.New("sqlite: write called inside InTx would wait for its own transaction: use the transaction (AppendTx, SaveCheckpointTx, ParkDeadLetterTx, DeleteDeadLetterTx)")

// inTxKey marks the context that InTx passes to its function; the value is
// the *txJob.
type inTxKey struct{}

// notInTx refuses a write that would deadlock on the writer (see ErrInTx).
func (s *Store) notInTx(ctx context.Context) error {
	if j, ok := ctx.Value(inTxKey{}).(*txJob); ok && j.w == s.w {
		return ErrInTx
	}
	return nil
}

// execJob is a write of the consumer or aggregate tables: fn runs in the
// writer's transaction, in a savepoint when it shares a group, so it joins
// appends in one commit and one fsync.
type execJob struct {
	fn func(tx *writeTx) error

	handoff

	err  error
	done chan struct{}
}

func (j *execJob) run(tx *writeTx) error { return j.fn(tx) }

func (j *execJob) finish(err error) {
	j.err = err
	close(j.done)
}

// write runs fn in the writer's next transaction and returns its outcome
// once the transaction has committed. fn's results are valid only when
// write returns nil. If ctx ends before the writer takes the job, nothing is
// written and write returns ctx.Err(); once taken, the job completes.
func (s *Store) write(ctx context.Context, fn func(tx *writeTx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.notInTx(ctx); err != nil {
		return err
	}
	j := &execJob{fn: fn, done: make(chan struct{})}
	if err := s.w.submit(j, true); err != nil {
		return err
	}
	if _, err := await(ctx, s.w, &j.handoff, j.done); err != nil {
		return err
	}
	return s.fileFailure("write", j.err)
}
