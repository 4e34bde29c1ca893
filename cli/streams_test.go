package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/cli"
	"github.com/cairn-es/cairn/internal/testrig/clitest"
)

// TestGoldenStreams runs the streams and events commands on the fixture
// (the cases of clitest.StreamsCases, which the cairn binary runs on
// KurrentDB too), on every backend, against one golden file per command
// line.
func TestGoldenStreams(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			url, store := b.create(t)
			buildFixture(t, store)
			require.NoError(t, store.Close())
			for _, tc := range clitest.StreamsCases {
				t.Run(tc.Name, func(t *testing.T) {
					r := run(t, cli.Options{}, "", append([]string{"--store", url}, tc.Args...)...)
					golden(t, tc.Name, clitest.Output(r.stdout, r.stderr, r.code))
				})
			}
		})
	}
}

// TestStreamsJSON parses --json back: the field names scripts rely on.
func TestStreamsJSON(t *testing.T) {
	url, store := backends()[0].create(t)
	stored := buildFixture(t, store)
	require.NoError(t, store.Close())

	r := run(t, cli.Options{}, "", "--store", url, "streams", "ls", "--json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	var streams []struct {
		Stream       string `json:"stream"`
		Events       uint64 `json:"events"`
		LastVersion  uint64 `json:"last_version"`
		LastPosition string `json:"last_position"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &streams))
	require.Len(t, streams, 5)
	assert.Equal(t, "order-1", streams[0].Stream)
	assert.Equal(t, uint64(3), streams[0].Events)
	assert.Equal(t, stored[5].Position.String(), streams[0].LastPosition)

	r = run(t, cli.Options{}, "", "--store", url, "streams", "read", "order-2", "--json", "--data")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 2, "one JSON object per event")
	var ev struct {
		Position string          `json:"position"`
		Stream   string          `json:"stream"`
		Version  uint64          `json:"version"`
		ID       string          `json:"id"`
		Type     string          `json:"type"`
		Data     json.RawMessage `json:"data"`
		Metadata map[string]any  `json:"metadata"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &ev))
	assert.Equal(t, "order.rejected", ev.Type)
	assert.Equal(t, uint64(1), ev.Version)
	assert.Equal(t, stored[6].ID.String(), ev.ID)
	assert.JSONEq(t, `{"order_id":"2","reason":"no payment in time"}`, string(ev.Data))
	assert.Equal(t, "flow-2", ev.Metadata["correlation_id"])

	// An error is JSON too, with the exit code, for a script to read.
	r = run(t, cli.Options{}, "", "--store", url, "streams", "read", "order-1", "--from", "x", "--json")
	require.Equal(t, cli.ExitUsage, r.code)
	var failure struct {
		Error    string `json:"error"`
		ExitCode int    `json:"exit_code"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &failure))
	assert.Equal(t, cli.ExitUsage, failure.ExitCode)
	assert.Contains(t, failure.Error, "--from")
}
