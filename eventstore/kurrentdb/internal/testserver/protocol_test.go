package testserver

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/serverfeatures"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/shared"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// These tests speak the protocol directly, for what the esdb client never
// sends or never shows.

func raw(t *testing.T, srv *Server) *grpc.ClientConn {
	t.Helper()
	addr := strings.TrimSuffix(strings.TrimPrefix(srv.URL(), "esdb://"), "?tls=false")
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func proposal(meta map[string]string, data []byte) *streams.AppendReq {
	return &streams.AppendReq{Content: &streams.AppendReq_ProposedMessage_{ProposedMessage: &streams.AppendReq_ProposedMessage{
		Id:       &shared.UUID{Value: &shared.UUID_String_{String_: uuid.NewString()}},
		Metadata: meta,
		Data:     data,
	}}}
}

func rawAppend(t *testing.T, conn *grpc.ClientConn, stream string, exp *streams.AppendReq_Options, msgs ...*streams.AppendReq) (*streams.AppendResp, metadata.MD, error) {
	t.Helper()
	exp.StreamIdentifier = &shared.StreamIdentifier{StreamName: []byte(stream)}
	var trailer metadata.MD
	call, err := streams.NewStreamsClient(conn).Append(ctxT(t), grpc.Trailer(&trailer))
	require.NoError(t, err)
	require.NoError(t, call.Send(&streams.AppendReq{Content: &streams.AppendReq_Options_{Options: exp}}))
	for _, m := range msgs {
		require.NoError(t, call.Send(m))
	}
	resp, err := call.CloseAndRecv()
	return resp, trailer, err
}

func anyRevision() *streams.AppendReq_Options {
	return &streams.AppendReq_Options{ExpectedStreamRevision: &streams.AppendReq_Options_Any{Any: &shared.Empty{}}}
}

func TestAppendRequiresTypeAndContentType(t *testing.T) {
	srv := quiet(t)
	conn := raw(t, srv)
	good := map[string]string{"type": "t", "content-type": "application/json"}

	_, trailer, err := rawAppend(t, conn, "s", anyRevision(),
		proposal(good, nil), proposal(map[string]string{"content-type": "application/json"}, nil), proposal(good, nil))
	require.Equal(t, codes.InvalidArgument, status.Code(err))
	require.Equal(t, "Required Metadata Property 'type' is missing", status.Convert(err).Message())
	require.Equal(t, []string{"missing-required-metadata-property"}, trailer.Get("exception"))

	_, _, err = rawAppend(t, conn, "s", anyRevision(), proposal(map[string]string{"type": "t"}, nil))
	require.Equal(t, codes.InvalidArgument, status.Code(err))
	require.Equal(t, "Required Metadata Property 'content-type' is missing", status.Convert(err).Message())

	// Nothing of a refused append is written.
	read, err := streams.NewStreamsClient(conn).Read(ctxT(t), countRead("s", 10, false))
	require.NoError(t, err)
	m, err := read.Recv()
	require.NoError(t, err)
	require.NotNil(t, m.GetStreamNotFound())
}

func TestAppendOverTheSizeLimitIsRefused(t *testing.T) {
	srv, err := Start(Options{StatsEvery: -1, MaxAppendSize: 100})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	_, trailer, err := rawAppend(t, raw(t, srv), "s", anyRevision(),
		proposal(map[string]string{"type": "t", "content-type": "x"}, make([]byte, 101)))
	require.Equal(t, codes.InvalidArgument, status.Code(err))
	require.Equal(t, []string{"maximum-append-size-exceeded"}, trailer.Get("exception"))
}

func TestWrongVersionSetsOnlyTheNewFields(t *testing.T) {
	conn := raw(t, quiet(t))
	exp := &streams.AppendReq_Options{ExpectedStreamRevision: &streams.AppendReq_Options_Revision{Revision: 7}}
	resp, _, err := rawAppend(t, conn, "s", exp, proposal(map[string]string{"type": "t", "content-type": "x"}, nil))
	require.NoError(t, err)
	w := resp.GetWrongExpectedVersion()
	require.NotNil(t, w)
	require.NotNil(t, w.GetCurrentNoStream())
	require.Equal(t, uint64(7), w.GetExpectedRevision())
	require.Nil(t, w.GetCurrentRevisionOption_20_6_0())
	require.Nil(t, w.GetExpectedRevisionOption_20_6_0())
}

func countRead(stream string, count uint64, uuidAsString bool) *streams.ReadReq {
	o := &streams.ReadReq_Options{
		StreamOption: &streams.ReadReq_Options_Stream{Stream: &streams.ReadReq_Options_StreamOptions{
			StreamIdentifier: &shared.StreamIdentifier{StreamName: []byte(stream)},
			RevisionOption:   &streams.ReadReq_Options_StreamOptions_Start{Start: &shared.Empty{}},
		}},
		CountOption:  &streams.ReadReq_Options_Count{Count: count},
		FilterOption: &streams.ReadReq_Options_NoFilter{NoFilter: &shared.Empty{}},
		UuidOption:   &streams.ReadReq_Options_UUIDOption{Content: &streams.ReadReq_Options_UUIDOption_Structured{Structured: &shared.Empty{}}},
	}
	if uuidAsString {
		o.UuidOption.Content = &streams.ReadReq_Options_UUIDOption_String_{String_: &shared.Empty{}}
	}
	return &streams.ReadReq{Options: o}
}

func TestCountReadSendsOnlyEventsAndEchoesOnlyTwoContentTypes(t *testing.T) {
	conn := raw(t, quiet(t))
	_, _, err := rawAppend(t, conn, "s", anyRevision(),
		proposal(map[string]string{"type": "a", "content-type": "application/json"}, []byte(`{}`)),
		proposal(map[string]string{"type": "b", "content-type": "text/plain"}, []byte("hi")))
	require.NoError(t, err)

	read, err := streams.NewStreamsClient(conn).Read(ctxT(t), countRead("s", 10, true))
	require.NoError(t, err)
	var cts []string
	for {
		m, err := read.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		e := m.GetEvent()
		require.NotNil(t, e, "a count read sends events only, got %T", m.GetContent())
		_, err = uuid.Parse(e.GetEvent().GetId().GetString_())
		require.NoError(t, err, "the ID comes in the form asked for")
		require.NotEmpty(t, e.GetEvent().GetMetadata()["created"])
		cts = append(cts, e.GetEvent().GetMetadata()["content-type"])
	}
	require.Equal(t, []string{"application/json", "application/octet-stream"}, cts)
}

func TestUnimplementedServices(t *testing.T) {
	conn := raw(t, quiet(t))
	_, err := serverfeatures.NewServerFeaturesClient(conn).GetSupportedMethods(ctxT(t), &shared.Empty{})
	require.Equal(t, codes.Unimplemented, status.Code(err), "the client accepts a node without ServerFeatures")
	batch, err := streams.NewStreamsClient(conn).BatchAppend(ctxT(t))
	require.NoError(t, err)
	_, err = batch.Recv()
	require.Equal(t, codes.Unimplemented, status.Code(err))
}
