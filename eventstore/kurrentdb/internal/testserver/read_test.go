package testserver

import (
	"testing"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/stretchr/testify/require"
)

func TestReadMissingStreamFailsOnFirstRecv(t *testing.T) {
	c := connect(t, quiet(t))
	rs, err := c.ReadStream(ctxT(t), "nope", esdb.ReadStreamOptions{}, 10)
	require.NoError(t, err)
	defer rs.Close()
	_, err = rs.Recv()
	require.Equal(t, esdb.ErrorCodeResourceNotFound, code(t, err))
	require.ErrorContains(t, err, "stream 'nope' is not found")
}

func TestReadStreamDirectionsAndStarts(t *testing.T) {
	c := connect(t, quiet(t))
	appendOK(t, c, "s", esdb.NoStream{}, events(5)...)

	cases := []struct {
		name  string
		opts  esdb.ReadStreamOptions
		count uint64
		want  []uint64
	}{
		{"forwards from start", esdb.ReadStreamOptions{}, 10, []uint64{0, 1, 2, 3, 4}},
		{"forwards with count", esdb.ReadStreamOptions{}, 2, []uint64{0, 1}},
		{"forwards from revision", esdb.ReadStreamOptions{From: esdb.Revision(3)}, 10, []uint64{3, 4}},
		{"forwards past the end", esdb.ReadStreamOptions{From: esdb.Revision(9)}, 10, nil},
		{"forwards from end", esdb.ReadStreamOptions{From: esdb.End{}}, 10, nil},
		{"backwards from end", esdb.ReadStreamOptions{Direction: esdb.Backwards, From: esdb.End{}}, 10, []uint64{4, 3, 2, 1, 0}},
		{"backwards last one", esdb.ReadStreamOptions{Direction: esdb.Backwards, From: esdb.End{}}, 1, []uint64{4}},
		{"backwards from revision", esdb.ReadStreamOptions{Direction: esdb.Backwards, From: esdb.Revision(2)}, 10, []uint64{2, 1, 0}},
		{"backwards from start", esdb.ReadStreamOptions{Direction: esdb.Backwards, From: esdb.Start{}}, 10, []uint64{0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readStream(t, c, "s", tc.opts, tc.count)
			require.NoError(t, err)
			if tc.want == nil {
				require.Empty(t, got)
				return
			}
			require.Equal(t, tc.want, numbers(got))
		})
	}
}

func TestReadAllBothWaysAndFromAPosition(t *testing.T) {
	c := connect(t, quiet(t))
	appendOK(t, c, "a", esdb.NoStream{}, events(3)...)
	appendOK(t, c, "b", esdb.NoStream{}, events(1)...)
	appendOK(t, c, "a", esdb.Revision(2), events(2)...)

	fwd := readAll(t, c, esdb.ReadAllOptions{}, 100)
	require.Len(t, fwd, 6)
	for i := 1; i < len(fwd); i++ {
		require.True(t, pos(fwd[i-1]).less(pos(fwd[i])), "$all is in position order")
	}
	require.Equal(t, []uint64{0, 1, 2, 0, 3, 4}, numbers(fwd))

	bwd := readAll(t, c, esdb.ReadAllOptions{Direction: esdb.Backwards, From: esdb.End{}}, 100)
	require.Len(t, bwd, 6)
	for i := range bwd {
		require.Equal(t, fwd[len(fwd)-1-i].EventID, bwd[i].EventID)
	}
	require.Len(t, readAll(t, c, esdb.ReadAllOptions{From: esdb.End{}}, 100), 0)
	require.Len(t, readAll(t, c, esdb.ReadAllOptions{Direction: esdb.Backwards, From: esdb.Start{}}, 100), 0)

	// From the position of the second event of a shared commit: forwards
	// includes it, backwards stops before it.
	at := fwd[1].Position
	from := readAll(t, c, esdb.ReadAllOptions{From: at}, 2)
	require.Equal(t, []string{fwd[1].EventID.String(), fwd[2].EventID.String()}, []string{from[0].EventID.String(), from[1].EventID.String()})
	before := readAll(t, c, esdb.ReadAllOptions{Direction: esdb.Backwards, From: at}, 10)
	require.Len(t, before, 1)
	require.Equal(t, fwd[0].EventID, before[0].EventID)

	// A position between events (a checkpoint's) starts at the next event.
	between := esdb.Position{Commit: fwd[2].Position.Commit, Prepare: fwd[2].Position.Prepare + 1}
	from = readAll(t, c, esdb.ReadAllOptions{From: between}, 1)
	require.Equal(t, fwd[3].EventID, from[0].EventID)
}
