package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// spansFile writes a parent's dispatch of order 7 and a consumer in
// another file that links to its append, and returns both files.
func spansFiles(t *testing.T) []string {
	dir := t.TempDir()
	var paths []string
	tracer := func(name string) trace.Tracer {
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		require.NoError(t, err)
		exp, err := stdouttrace.New(stdouttrace.WithWriter(f))
		require.NoError(t, err)
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
			sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.instance.id", name))))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = f.Close() })
		paths = append(paths, path)
		return tp.Tracer("t")
	}
	parent, child := tracer("trace.jsonl"), tracer("trace.sale-1.jsonl")
	ctx, d := parent.Start(context.Background(), "dispatch PlaceOrder", trace.WithAttributes(attribute.String("cairn.stream", "order-7")))
	_, a := parent.Start(ctx, "append order")
	a.End()
	d.End()
	_, p := child.Start(context.Background(), "process sale", trace.WithSpanKind(trace.SpanKindConsumer), trace.WithLinks(trace.Link{SpanContext: a.SpanContext()}))
	p.End()
	_, other := parent.Start(context.Background(), "dispatch PlaceOrder", trace.WithAttributes(attribute.String("cairn.stream", "order-8")))
	other.End()
	return paths
}

func TestToolDrawsOneOrdersPicture(t *testing.T) {
	files := spansFiles(t)
	out := filepath.Join(t.TempDir(), "picture.svg")
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run(append([]string{"-id", "7", "-o", out}, files...), &stdout, &stderr), stderr.String())
	svg, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Contains(t, string(svg), "7: 3 spans, 2 traces")
	assert.Contains(t, string(svg), ">process sale<")
	assert.NotContains(t, string(svg), "order-8")
	assert.Contains(t, stderr.String(), "3 spans")

	stdout.Reset()
	require.Equal(t, 0, run(append([]string{"-list"}, files...), &stdout, &stderr))
	assert.Equal(t, "7\t1 commands\n8\t1 commands\n", stdout.String())

	// -pick takes the order whose picture crosses the most processes.
	stderr.Reset()
	require.Equal(t, 0, run(append([]string{"-pick", "-o", out}, files...), &stdout, &stderr), stderr.String())
	assert.Contains(t, stderr.String(), "-pick: 7\n")
	svg, err = os.ReadFile(out)
	require.NoError(t, err)
	assert.Contains(t, string(svg), "7: 3 spans, 2 traces, 2 processes")
}

func TestToolRefusesWhatItCannotDraw(t *testing.T) {
	files := spansFiles(t)
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{nil, 2, "usage"},
		{files, 2, "say where to start"},
		{append([]string{"-span", "xyz"}, files...), 2, "-span"},
		{append([]string{"-id", "9"}, files...), 1, "no span to start from for 9"},
		{[]string{"-id", "7", filepath.Join(t.TempDir(), "missing.jsonl")}, 1, "missing.jsonl"},
	} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, c.code, run(c.args, &stdout, &stderr), strings.Join(c.args, " "))
		assert.Contains(t, stderr.String(), c.says)
	}
}
