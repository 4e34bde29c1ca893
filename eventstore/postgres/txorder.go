package postgres

import (
	"errors"
	"fmt"
)

// ErrTxTooOld matches every [*TxTooOldError]: [Store.AppendTx] refused to
// append to a stream whose last event was written by a younger transaction
// than the caller's.
//
// The events would get a global position (the transaction's ID) below that
// of the stream's last event, so that subscribers and ReadAll would see
// the stream out of version order. The transaction keeps its ID until it
// ends, so no retry inside it can succeed: roll it back and run it again
// from the start, in a new transaction (see [Store.AppendTx]).
var ErrTxTooOld = errors.New("postgres: transaction is older than the stream's last writer")

// TxTooOldError reports an [Store.AppendTx] refused because the stream's
// last event belongs to a younger transaction. Nothing was written; the
// caller's transaction is still usable, but appending to this stream in it
// never will be.
type TxTooOldError struct {
	Stream string
	// Version is the version of the stream's last event, the one written
	// by the younger transaction.
	Version uint64
	// TxID is the caller's transaction ID, taken when it first wrote.
	TxID uint64
	// LastTxID is the ID of the younger transaction that wrote Version.
	LastTxID uint64
}

func (e *TxTooOldError) Error() string {
	return fmt.Sprintf("postgres: append to stream %q at version %d in transaction %d: version %d was written by transaction %d, "+
		"which is younger, so the new events would sort before it; roll back and retry the whole transaction",
		e.Stream, e.Version+1, e.TxID, e.Version, e.LastTxID)
}

// Is makes errors.Is(err, ErrTxTooOld) true.
func (e *TxTooOldError) Is(target error) bool { return target == ErrTxTooOld }
