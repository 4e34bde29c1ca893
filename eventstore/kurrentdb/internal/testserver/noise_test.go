package testserver

import (
	"strings"
	"testing"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/stretchr/testify/require"
)

func TestAllHoldsStatsNoise(t *testing.T) {
	srv, err := Start(Options{StatsEvery: 3})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	c := connect(t, srv)

	start := readAll(t, c, esdb.ReadAllOptions{}, 10)
	require.Len(t, start, 2, "a fresh node already has system events")
	require.Equal(t, "$$"+statsStream, start[0].StreamID)
	require.Equal(t, "$metadata", start[0].EventType)
	require.Equal(t, statsStream, start[1].StreamID)
	require.Equal(t, "$statsCollected", start[1].EventType)

	for range 6 {
		appendOK(t, c, "s", esdb.Any{}, events(1)...)
	}
	var stats, user int
	for _, e := range readAll(t, c, esdb.ReadAllOptions{}, 100) {
		switch {
		case strings.HasPrefix(e.StreamID, "$stats-"):
			stats++
		case e.StreamID == "s":
			user++
		}
	}
	require.Equal(t, 6, user)
	require.Equal(t, 3, stats, "one at start and one after every third append")
}

func TestDefaultServerHasNoiseAndNewRegistersCleanup(t *testing.T) {
	srv := New(t)
	c := connect(t, srv)
	require.NotEmpty(t, readAll(t, c, esdb.ReadAllOptions{}, 10))
	require.Regexp(t, `^esdb://127\.0\.0\.1:\d+\?tls=false$`, srv.URL())
}
