package kurrentdb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-es/cairn/eventstore"
)

// fail turns an error of the client, met doing what (which names the
// stream or consumer), into the store's: [eventstore.ErrClosed] after
// Close, the caller's own context error, [eventstore.ErrUnavailable] for a
// failure expected to pass (the server unreachable, a leader change, a
// deadline), and otherwise the client's error, wrapped with what.
func (s *Store) fail(ctx context.Context, what string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, eventstore.ErrClosed) || s.isClosed():
		return eventstore.ErrClosed
	case ctx.Err() != nil:
		return ctx.Err()
	case pastDeadline(ctx):
		// gRPC may see the caller's deadline pass a moment before the
		// context's own timer says so: wait for it, so that the caller
		// finds its context done when it looks.
		<-ctx.Done()
		return ctx.Err()
	case transient(err):
		return fmt.Errorf("kurrentdb: %s: %w: %w", what, eventstore.ErrUnavailable, err)
	}
	return fmt.Errorf("kurrentdb: %s: %w", what, err)
}

// pastDeadline reports whether ctx's deadline has passed.
func pastDeadline(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// transient reports whether err, from the client, is worth a retry: the
// call failed where nothing says it will fail again.
func transient(err error) bool {
	// The client sends on a connection that closed under it as an
	// unknown error wrapping io.EOF, and starts no reconnect of its own.
	if errors.Is(err, eventstore.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var e *esdb.Error
	if errors.As(err, &e) {
		switch e.Code() {
		case esdb.ErrorCodeDeadlineExceeded, esdb.ErrorUnavailable, esdb.ErrorCodeConnectionClosed,
			esdb.ErrorCodeNotLeader, esdb.ErrorAborted:
			return true
		}
		err = e.Err()
	}
	// Errors the client returns raw, without its own code: a dropped
	// subscription, a failed read request.
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.Unavailable, codes.DeadlineExceeded, codes.Aborted, codes.ResourceExhausted:
			return true
		}
	}
	return false
}

// isWrongVersion reports whether err is KurrentDB's refusal of a write
// whose expected revision is not the stream's.
func isWrongVersion(err error) bool { return isCode(err, esdb.ErrorCodeWrongExpectedVersion) }

// isCode reports whether err is the client's error with code.
func isCode(err error, code esdb.ErrorCode) bool {
	var e *esdb.Error
	return errors.As(err, &e) && e.Code() == code
}
