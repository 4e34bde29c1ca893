package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/internal/tools/tracepic/waterfall"
)

func TestTraceFilesSitBesideThePath(t *testing.T) {
	assert.Equal(t, "t/trace.sale-2.jsonl", salePath("t/trace.jsonl", 2))
	assert.Equal(t, "t/trace.metrics.jsonl", metricsPath("t/trace.jsonl"))
	assert.Equal(t, "t/trace.sale-1.metrics.jsonl", metricsPath(salePath("t/trace.jsonl", 1)))
	assert.Equal(t, "trace.sale-1.jsonl", salePath("trace", 1), "a path without an extension")

	// An earlier run's sale files go; anything else beside them stays.
	dir := t.TempDir()
	path := filepath.Join(dir, "trace.jsonl")
	keep := []string{"trace.jsonl", "trace.sale-x.jsonl", "trace.sale-1.txt", "other.sale-1.jsonl"}
	gone := []string{"trace.sale-1.jsonl", "trace.sale-12.jsonl", "trace.sale-1.metrics.jsonl"}
	for _, name := range append(keep, gone...) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), nil, 0o644))
	}
	require.NoError(t, removeSaleFiles(path))
	for _, name := range keep {
		assert.FileExists(t, filepath.Join(dir, name))
	}
	for _, name := range gone {
		assert.NoFileExists(t, filepath.Join(dir, name))
	}
}

func TestTelemetryWritesEachSpanAsItEndsAndWithStartsAsItStarts(t *testing.T) {
	dir := t.TempDir()
	for _, starts := range []bool{false, true} {
		path := filepath.Join(dir, "sub", "trace.jsonl")
		tel, err := startTelemetry(path, "sale #1", starts)
		require.NoError(t, err)
		_, open := tel.tracerProvider().Tracer("t").Start(context.Background(), "open")
		_, done := tel.tracerProvider().Tracer("t").Start(context.Background(), "done")
		done.End()
		// What a process killed now leaves: the file as it is.
		spans, skipped, err := waterfall.ReadFiles(path)
		require.NoError(t, err)
		assert.Zero(t, skipped)
		if starts {
			require.Len(t, spans, 2, "the open span as it started, the other as it ended")
			assert.True(t, spans[0].Unfinished())
			assert.Equal(t, "open", spans[0].Name)
			assert.False(t, spans[1].Unfinished())
		} else {
			require.Len(t, spans, 1, "the span that ended")
			assert.Equal(t, "done", spans[0].Name)
		}
		role, _ := spans[0].ResourceAttr(roleKey)
		assert.Equal(t, "sale #1", role.AsString())
		open.End()
		require.NoError(t, tel.shutdown(context.Background()))
		assert.FileExists(t, metricsPath(path))
	}
	var none *otelSDK
	assert.Nil(t, none.tracerProvider(), "no -trace: the global providers")
	assert.Nil(t, none.meterProvider())
	assert.NoError(t, none.shutdown(context.Background()))

	_, err := startTelemetry("otlp", roleParent, false)
	assert.ErrorIs(t, err, errNoOTLP)
}
