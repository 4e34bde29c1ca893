package testserver

import (
	"testing"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/stretchr/testify/require"
)

func setMeta(t *testing.T, c *esdb.Client, stream string, m esdb.StreamMetadata) {
	t.Helper()
	_, err := c.SetStreamMetadata(ctxT(t), stream, esdb.AppendToStreamOptions{}, m)
	require.NoError(t, err)
}

func TestMaxCountLeavesOnlyTheLastEventsReadable(t *testing.T) {
	c := connect(t, quiet(t))
	appendOK(t, c, "s", esdb.NoStream{}, events(5)...)
	var m esdb.StreamMetadata
	m.SetMaxCount(2)
	setMeta(t, c, "s", m)

	got, err := readStream(t, c, "s", esdb.ReadStreamOptions{}, 10)
	require.NoError(t, err)
	require.Equal(t, []uint64{3, 4}, numbers(got))
	got, err = readStream(t, c, "s", esdb.ReadStreamOptions{From: esdb.Revision(1)}, 10)
	require.NoError(t, err)
	require.Equal(t, []uint64{3, 4}, numbers(got))
	got, err = readStream(t, c, "s", esdb.ReadStreamOptions{Direction: esdb.Backwards, From: esdb.End{}}, 10)
	require.NoError(t, err)
	require.Equal(t, []uint64{4, 3}, numbers(got))

	// Revisions keep growing; the window moves with them.
	appendOK(t, c, "s", esdb.Revision(4), events(1)...)
	got, err = readStream(t, c, "s", esdb.ReadStreamOptions{}, 10)
	require.NoError(t, err)
	require.Equal(t, []uint64{4, 5}, numbers(got))

	// $all keeps every event until a scavenge, which never comes here.
	n := 0
	for _, e := range readAll(t, c, esdb.ReadAllOptions{}, 100) {
		if e.StreamID == "s" {
			n++
		}
	}
	require.Equal(t, 6, n)

	back, err := c.GetStreamMetadata(ctxT(t), "s", esdb.ReadStreamOptions{})
	require.NoError(t, err)
	require.Equal(t, uint64(2), *back.MaxCount())
}

func TestTruncateBeforeHidesEarlierEvents(t *testing.T) {
	c := connect(t, quiet(t))
	appendOK(t, c, "s", esdb.NoStream{}, events(5)...)
	var m esdb.StreamMetadata
	m.SetTruncateBefore(3)
	setMeta(t, c, "s", m)

	got, err := readStream(t, c, "s", esdb.ReadStreamOptions{}, 10)
	require.NoError(t, err)
	require.Equal(t, []uint64{3, 4}, numbers(got))

	// All truncated: the stream still exists, it reads empty.
	m.SetTruncateBefore(10)
	setMeta(t, c, "s", m)
	got, err = readStream(t, c, "s", esdb.ReadStreamOptions{}, 10)
	require.NoError(t, err)
	require.Empty(t, got)
}

func TestMetadataIsSystemNoiseInAll(t *testing.T) {
	c := connect(t, quiet(t))
	var m esdb.StreamMetadata
	m.SetMaxCount(1)
	setMeta(t, c, "cp", m)

	e := lastInAll(t, c)
	require.Equal(t, "$$cp", e.StreamID)
	require.Equal(t, "$metadata", e.EventType)
	require.JSONEq(t, `{"$maxCount":1}`, string(e.Data))

	// A stream with only metadata reads as not found, but exists for
	// StreamExists.
	_, err := readStream(t, c, "cp", esdb.ReadStreamOptions{}, 1)
	require.Equal(t, esdb.ErrorCodeResourceNotFound, code(t, err))
	res := appendOK(t, c, "cp", esdb.StreamExists{}, events(1)...)
	require.Equal(t, uint64(0), res.NextExpectedVersion)
}

func TestSettingMetadataOfASoftDeletedStreamRecreatesItEmpty(t *testing.T) {
	c := connect(t, quiet(t))
	appendOK(t, c, "s", esdb.NoStream{}, events(3)...)
	_, err := c.DeleteStream(ctxT(t), "s", esdb.DeleteStreamOptions{})
	require.NoError(t, err)

	var m esdb.StreamMetadata
	m.SetMaxCount(10)
	setMeta(t, c, "s", m)
	// The server keeps the new metadata and moves $tb past the old events.
	e := lastInAll(t, c)
	require.Equal(t, "$$s", e.StreamID)
	require.JSONEq(t, `{"$maxCount":10,"$tb":3}`, string(e.Data))
	got, err := readStream(t, c, "s", esdb.ReadStreamOptions{}, 10)
	require.NoError(t, err)
	require.Empty(t, got)
}
