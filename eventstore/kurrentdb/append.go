package kurrentdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// raceAttempts bounds how often an append with caller-chosen IDs looks its
// stream up again after another writer appended between its look-up and its
// write.
const raceAttempts = 64

// Append implements [eventstore.Store.Append].
//
// KurrentDB checks the expected version atomically, but its idempotence by
// event ID holds only in some cases and its reply never says that it
// absorbed a repeat (docs/kurrentdb.md). So an append whose events carry
// IDs the caller chose (the command bus's do: they derive from command IDs)
// first looks its IDs up in the stream, as every Cairn store does, and then
// writes at the exact version it saw, so that a write racing it makes the
// server refuse and the look-up run again. Its last event carries a nonce,
// read back after the write: a different one means that a twin of this
// append won the race and the server absorbed this one as a repeat.
// An append of fresh IDs (zero IDs, which the store fills in) cannot be a
// repeat, and writes at once.
func (s *Store) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	if err := s.usable(ctx); err != nil {
		return eventstore.AppendResult{}, err
	}
	chosen := false
	for i := range events {
		chosen = chosen || events[i].ID != uuid.Nil
	}
	prepared, err := storekit.PrepareAppend(ctx, stream, events)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	if err := checkNames(stream, prepared); err != nil {
		return eventstore.AppendResult{}, err
	}
	if !chosen {
		return s.appendFresh(ctx, stream, expected, prepared)
	}
	return s.appendChosen(ctx, stream, expected, prepared)
}

// checkNames refuses what KurrentDB or this store keeps for itself: the
// store's own streams, and types starting with "$" (system events, which
// reads leave out). Stream names starting with "$" are refused by
// storekit.ValidateStream already.
func checkNames(stream string, events []eventstore.EventData) error {
	if isState(stream) {
		return &eventstore.InvalidArgumentError{Stream: stream, Index: -1, Field: "stream",
			Reason: fmt.Sprintf("starts with %q, where the KurrentDB store keeps its consumers' state", StatePrefix)}
	}
	for i := range events {
		if strings.HasPrefix(events[i].Type, "$") {
			return &eventstore.InvalidArgumentError{Stream: stream, Index: i, Field: "type",
				Reason: fmt.Sprintf("%q starts with \"$\", which KurrentDB keeps for its system events", events[i].Type)}
		}
	}
	return nil
}

// appendFresh writes events whose IDs the store chose: none can be in the
// stream already.
func (s *Store) appendFresh(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events []eventstore.EventData) (eventstore.AppendResult, error) {
	res, err := s.write(ctx, stream, revision(expected), events, "")
	if isWrongVersion(err) {
		actual, rerr := s.actualVersion(ctx, stream, err)
		if rerr != nil {
			return eventstore.AppendResult{}, rerr
		}
		return eventstore.AppendResult{}, &eventstore.WrongVersionError{Stream: stream, Expected: expected, Actual: actual}
	}
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	last := res.NextExpectedVersion
	first := last + 1 - uint64(len(events))
	rec, err := s.eventAt(ctx, stream, last)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	if rec.EventID != events[len(events)-1].ID {
		return eventstore.AppendResult{}, fmt.Errorf("%w: kurrentdb: append to %q: event %d is %s, not the event just written",
			eventstore.ErrCorrupt, stream, last, rec.EventID)
	}
	s.repeats.record(stream, first, events)
	return eventstore.AppendResult{FirstVersion: first, LastVersion: last, Position: position(rec)}, nil
}

// appendChosen writes events whose IDs the caller chose, absorbing a
// repeat (see Append).
func (s *Store) appendChosen(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events []eventstore.EventData) (eventstore.AppendResult, error) {
	n := uint64(len(events))
	for attempt := 1; ; attempt++ {
		// The first attempt trusts what the store knows of the stream; a
		// refusal, or an expected version it does not match, looks again.
		seen, err := s.lookUp(ctx, stream, events, attempt > 1)
		if err != nil {
			return eventstore.AppendResult{}, err
		}
		first, repeat, err := storekit.CheckRepeat(stream, expected, events, seen.Repeat)
		if err != nil && attempt == 1 {
			continue // a part of a repeat may be what the store has not seen yet
		}
		if err != nil {
			return eventstore.AppendResult{}, err
		}
		if repeat {
			return s.duplicate(ctx, stream, first, n)
		}
		if !expected.Matches(seen.last, seen.exists) {
			if attempt == 1 {
				continue // what the store knew may be old
			}
			return eventstore.AppendResult{}, &eventstore.WrongVersionError{Stream: stream, Expected: expected, Actual: seen.Current}
		}
		var wire esdb.ExpectedRevision = esdb.NoStream{}
		if seen.exists {
			wire = esdb.Revision(seen.last)
		}
		nonce := newNonce()
		res, err := s.write(ctx, stream, wire, events, nonce)
		if isWrongVersion(err) && attempt < raceAttempts {
			continue // another writer came between: look again
		}
		if isWrongVersion(err) {
			actual, rerr := s.actualVersion(ctx, stream, err)
			if rerr != nil {
				return eventstore.AppendResult{}, rerr
			}
			return eventstore.AppendResult{}, fmt.Errorf("kurrentdb: append to %q lost the race to other writers %d times: %w",
				stream, attempt, &eventstore.WrongVersionError{Stream: stream, Expected: expected, Actual: actual})
		}
		if err != nil {
			return eventstore.AppendResult{}, err
		}
		last := res.NextExpectedVersion
		first = last + 1 - n
		rec, err := s.eventAt(ctx, stream, last)
		if err != nil {
			return eventstore.AppendResult{}, err
		}
		env, err := decodeEnvelope(stream, last, rec.UserMetadata)
		if err != nil {
			return eventstore.AppendResult{}, err
		}
		twin := env.Nonce != nonce
		if !twin {
			// A twin's events may carry other metadata than these: the
			// next look-up reads them.
			s.repeats.record(stream, first, events)
		}
		return eventstore.AppendResult{FirstVersion: first, LastVersion: last, Position: position(rec), Duplicate: twin}, nil
	}
}

// duplicate is the result of an append that repeats the n events that the
// stream holds from version first.
func (s *Store) duplicate(ctx context.Context, stream string, first, n uint64) (eventstore.AppendResult, error) {
	last := first + n - 1
	rec, err := s.eventAt(ctx, stream, last)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	return eventstore.AppendResult{FirstVersion: first, LastVersion: last, Position: position(rec), Duplicate: true}, nil
}

// write appends events to stream at the wire's expected revision, the
// last event carrying nonce.
func (s *Store) write(ctx context.Context, stream string, wire esdb.ExpectedRevision, events []eventstore.EventData, nonce string) (*esdb.WriteResult, error) {
	out := make([]esdb.EventData, len(events))
	for i := range events {
		e := &events[i]
		mark := ""
		if i == len(events)-1 {
			mark = nonce
		}
		md, err := encodeEnvelope(e, mark)
		if err != nil {
			return nil, fmt.Errorf("kurrentdb: append to %q: event %d: metadata: %w", stream, i, err)
		}
		// The content type matters only to KurrentDB's own projections,
		// which read JSON; Cairn reads the bytes back as they were.
		ct := esdb.ContentTypeBinary
		if json.Valid(e.Data) {
			ct = esdb.ContentTypeJson
		}
		out[i] = esdb.EventData{EventID: e.ID, EventType: e.Type, ContentType: ct, Data: e.Data, Metadata: md}
	}
	return s.appendToStream(ctx, stream, wire, out, false)
}

// appendToStream appends out to stream at the expected revision through
// the client. A wrong expected version comes back as the client's error
// (match it with isWrongVersion), for the caller to decide. A refusal of
// the append as malformed is an [*eventstore.InvalidArgumentError] naming
// the server's MaxAppendSize when the server says the append is too large,
// or when sizeOnly says that the store wrote everything else itself, so
// that only the size can be wrong. Other errors are the store's.
func (s *Store) appendToStream(ctx context.Context, stream string, expected esdb.ExpectedRevision, out []esdb.EventData, sizeOnly bool) (*esdb.WriteResult, error) {
	var res *esdb.WriteResult
	err := s.call(ctx, func(ctx context.Context, cli *esdb.Client) error {
		var err error
		res, err = cli.AppendToStream(ctx, stream, esdb.AppendToStreamOptions{ExpectedRevision: expected}, out...)
		return err
	})
	if isWrongVersion(err) {
		return nil, err
	}
	if st, ok := grpcStatus(err); ok && st.Code() == codes.InvalidArgument {
		reason := "refused by KurrentDB: " + st.Message()
		if sizeOnly || strings.Contains(st.Message(), "Maximum Append Size") {
			reason += " (the server's MaxAppendSize setting bounds the bytes of one append)"
		}
		return nil, &eventstore.InvalidArgumentError{Stream: stream, Index: -1, Field: "append size", Reason: reason}
	}
	if err != nil {
		return nil, s.fail(ctx, fmt.Sprintf("append to %q", stream), err)
	}
	return res, nil
}

// grpcStatus returns the status of the gRPC error inside an error of the
// client, whose own message wraps it.
func grpcStatus(err error) (*status.Status, bool) {
	for ; err != nil; err = errors.Unwrap(err) {
		if g, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
			return g.GRPCStatus(), true
		}
	}
	return nil, false
}

// eventAt reads the event at version of stream.
func (s *Store) eventAt(ctx context.Context, stream string, version uint64) (*esdb.RecordedEvent, error) {
	var rec *esdb.RecordedEvent
	_, err := s.readStream(ctx, stream, version, false, 1, func(r *esdb.RecordedEvent) (bool, error) {
		rec = r
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	if rec == nil || rec.EventNumber != version {
		return nil, fmt.Errorf("%w: kurrentdb: stream %q has no event %d, which the server just reported", eventstore.ErrUnavailable, stream, version)
	}
	return rec, nil
}

// wrongVersionText is how the client reports the versions of a refused
// append; it keeps them nowhere else.
var wrongVersionText = regexp.MustCompile(`expecting '([^']*)' but got '([^']*)'`)

// actualVersion is the state of stream after the server refused an append
// with err: from the error's text, or, where the text is ambiguous (the
// client says "0" when the server sent no version), from the stream.
func (s *Store) actualVersion(ctx context.Context, stream string, err error) (eventstore.ExpectedVersion, error) {
	if m := wrongVersionText.FindStringSubmatch(err.Error()); m != nil {
		if m[2] == "no_stream" {
			return eventstore.NoStream, nil
		}
		if v, perr := strconv.ParseUint(m[2], 10, 64); perr == nil && v != 0 {
			return eventstore.Exact(v), nil
		}
	}
	return s.currentVersion(ctx, stream)
}

// currentVersion reads the state of stream: NoStream or its last version.
func (s *Store) currentVersion(ctx context.Context, stream string) (eventstore.ExpectedVersion, error) {
	var last *esdb.RecordedEvent
	_, err := s.readStream(ctx, stream, 1<<63-1, true, 1, func(r *esdb.RecordedEvent) (bool, error) {
		last = r
		return false, nil
	})
	if err != nil {
		return eventstore.ExpectedVersion{}, err
	}
	if last == nil {
		return eventstore.NoStream, nil
	}
	return eventstore.Exact(last.EventNumber), nil
}

// revision is expected as the client takes it.
func revision(expected eventstore.ExpectedVersion) esdb.ExpectedRevision {
	switch v, exact := expected.Version(); {
	case exact:
		return esdb.Revision(v)
	case expected.IsNoStream():
		return esdb.NoStream{}
	case expected.IsStreamExists():
		return esdb.StreamExists{}
	}
	return esdb.Any{}
}

// position is the Cairn position of a recorded event.
func position(r *esdb.RecordedEvent) eventstore.Position {
	return eventstore.Position{Major: r.Position.Commit, Minor: r.Position.Prepare}
}

// newNonce returns a random mark for the last event of one append.
func newNonce() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
