package testserver

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/shared"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// The server's content types: it stores only "is JSON" and answers one of
// these two, whatever the append said.
const (
	contentJSON   = "application/json"
	contentBinary = "application/octet-stream"
)

// uuidFromProto reads an event ID in either form the protocol allows.
func uuidFromProto(u *shared.UUID) (uuid.UUID, error) {
	switch v := u.GetValue().(type) {
	case *shared.UUID_Structured_:
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], uint64(v.Structured.GetMostSignificantBits()))
		binary.BigEndian.PutUint64(b[8:], uint64(v.Structured.GetLeastSignificantBits()))
		return uuid.UUID(b), nil
	case *shared.UUID_String_:
		return uuid.Parse(v.String_)
	}
	return uuid.Nil, fmt.Errorf("event id missing")
}

func uuidToProto(id uuid.UUID, asString bool) *shared.UUID {
	if asString {
		return &shared.UUID{Value: &shared.UUID_String_{String_: id.String()}}
	}
	return &shared.UUID{Value: &shared.UUID_Structured_{Structured: &shared.UUID_Structured{
		MostSignificantBits:  int64(binary.BigEndian.Uint64(id[:8])),
		LeastSignificantBits: int64(binary.BigEndian.Uint64(id[8:])),
	}}}
}

// eventResp is a stored event as a read or a subscription sends it. Every
// event carries `type`, `content-type` and `created`: without `created` the
// client calls log.Fatalf.
func eventResp(r *record, uuidAsString bool) *streams.ReadResp {
	ct := contentBinary
	if r.json {
		ct = contentJSON
	}
	return &streams.ReadResp{Content: &streams.ReadResp_Event{Event: &streams.ReadResp_ReadEvent{
		Event: &streams.ReadResp_ReadEvent_RecordedEvent{
			Id:               uuidToProto(r.id, uuidAsString),
			StreamIdentifier: &shared.StreamIdentifier{StreamName: []byte(r.stream)},
			StreamRevision:   uint64(r.rev),
			PreparePosition:  r.pos.prepare,
			CommitPosition:   r.pos.commit,
			Metadata: map[string]string{
				"type":         r.typ,
				"content-type": ct,
				"created":      strconv.FormatInt(r.created, 10),
			},
			CustomMetadata: r.meta,
			Data:           r.data,
		},
		// Servers since 22.6 give every event its position, stream reads
		// included; the client checks that in its own tests.
		Position: &streams.ReadResp_ReadEvent_CommitPosition{CommitPosition: r.pos.commit},
	}}}
}

// errStreamDeleted is the server's answer for a tombstoned stream: the
// client recognises it by the `exception` trailer, not by the code.
func errStreamDeleted(setTrailer func(metadata.MD), name string) error {
	setTrailer(metadata.Pairs("exception", "stream-deleted", "stream-name", name))
	return status.Errorf(codes.FailedPrecondition, "Event stream '%s' is deleted.", name)
}

// errMissingMetadata is the server's answer to a proposed event without
// `type` or `content-type`.
func errMissingMetadata(setTrailer func(metadata.MD), key string) error {
	setTrailer(metadata.Pairs(
		"exception", "missing-required-metadata-property",
		"required-metadata-properties", "type,content-type"))
	return status.Errorf(codes.InvalidArgument, "Required Metadata Property '%s' is missing", key)
}

// errAppendTooLarge is the server's answer to an append over its size limit.
func errAppendTooLarge(setTrailer func(metadata.MD), limit int) error {
	setTrailer(metadata.Pairs(
		"exception", "maximum-append-size-exceeded",
		"maximum-append-size", strconv.Itoa(limit)))
	return status.Errorf(codes.InvalidArgument, "Maximum Append Size of %d Exceeded.", limit)
}

// errDeleteWrongVersion is the server's answer to a delete or tombstone
// whose expected version fails. The Go client maps FailedPrecondition to
// ErrorCodeUnknown; only this text tells the actual version.
func errDeleteWrongVersion(setTrailer func(metadata.MD), name string, expected, actual int64) error {
	setTrailer(metadata.Pairs(
		"exception", "wrong-expected-version",
		"stream-name", name,
		"expected-version", strconv.FormatInt(expected, 10),
		"actual-version", strconv.FormatInt(actual, 10)))
	return status.Errorf(codes.FailedPrecondition,
		"Delete failed due to WrongExpectedVersion. Stream: %s, Expected version: %d, Actual version: %d",
		name, expected, actual)
}
