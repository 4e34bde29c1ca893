package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// With -trace, every process of the example (this one, and each sale
// process it starts) installs the OpenTelemetry SDK and hands its
// providers to the bus, the consumers and the saga runner through their
// options. Cairn itself takes only the API; the SDK and the exporter are
// the service's choice, as here.
//
// Each process writes its spans to a file of its own, one JSON span per
// line (the SDK's stdout exporter), beside the path -trace names:
//
//	trace.jsonl                 this process's spans
//	trace.metrics.jsonl         its metrics, every few seconds and at exit
//	trace.sale-1.jsonl          the first sale process's spans
//	trace.sale-1.metrics.jsonl  its metrics
//	trace.sale-2.jsonl          the sale process started after the kill
//
// One file per process, rather than one file that all of them append to,
// because a process killed with SIGKILL may die in the middle of a write:
// then only its own file ends in a cut line, which readers skip
// (internal/tools/tracepic does). Spans are written as each one ends (a
// synchronous processor, not a batching one), so a killed process loses
// only the spans it had not ended yet, never a batch of ended ones.
//
// Those it had not ended would still be lost: the step or the send the
// kill interrupted, whose children that did end (an append, a dispatch)
// would then have no parent, and the trace would break where the crash
// was. So a sale process, which the example kills, also writes each span
// as it starts, with its parent, its links and the attributes it started
// with, and without an end time: readers take the ended record when there
// is one, and show a span that has only its start record as interrupted.

// traceRole names the process in its spans' resource, under roleKey.
const (
	roleParent = "parent"
	roleKey    = attribute.Key("reservation.process")
)

// metricsInterval is how often a traced process writes its metrics.
const metricsInterval = 5 * time.Second

// otelSDK is one process's OpenTelemetry SDK: its providers and the
// files they write.
type otelSDK struct {
	tp    *sdktrace.TracerProvider
	mp    *sdkmetric.MeterProvider
	files []*os.File
}

// errNoOTLP explains why -trace otlp is refused.
var errNoOTLP = errors.New("-trace otlp: this example exports to files only: the OTLP exporter's module brings gRPC into the main module's graph, which Cairn keeps free of it (use the files, or an OpenTelemetry Collector's filelog receiver)")

// startTelemetry installs the SDK for one process of the example, role
// ("parent", "sale #1", ...), writing its spans to spansPath and its
// metrics beside it (see [metricsPath]); with starts, each span as it
// starts too.
func startTelemetry(spansPath, role string, starts bool) (*otelSDK, error) {
	if spansPath == "otlp" {
		return nil, errNoOTLP
	}
	if dir := filepath.Dir(spansPath); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	t := &otelSDK{}
	spans, err := t.create(spansPath)
	if err != nil {
		return nil, err
	}
	metrics, err := t.create(metricsPath(spansPath))
	if err != nil {
		t.close()
		return nil, err
	}
	res := resource.NewSchemaless(
		attribute.String("service.name", "reservation"),
		attribute.String("service.instance.id", fmt.Sprintf("%s-%d", strings.ReplaceAll(role, " #", "-"), os.Getpid())),
		attribute.Int("process.pid", os.Getpid()),
		roleKey.String(role),
	)
	spanExp, err := stdouttrace.New(stdouttrace.WithWriter(spans))
	if err != nil {
		t.close()
		return nil, err
	}
	metricExp, err := stdoutmetric.New(stdoutmetric.WithWriter(metrics))
	if err != nil {
		t.close()
		return nil, err
	}
	t.tp = sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		// Synchronous: each span is one write as it ends (see above).
		sdktrace.WithSyncer(spanExp),
	)
	if starts {
		t.tp.RegisterSpanProcessor(startWriter{spanExp})
	}
	t.mp = sdkmetric.NewMeterProvider(
		sdkmetric.WithResource(res),
		sdkmetric.WithReader(sdkmetric.NewPeriodicReader(metricExp, sdkmetric.WithInterval(metricsInterval))),
	)
	return t, nil
}

func (t *otelSDK) create(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("-trace: %w", err)
	}
	t.files = append(t.files, f)
	return f, nil
}

// tracerProvider and meterProvider return the providers, nil (Cairn's
// default: the global ones) when t is nil.
func (t *otelSDK) tracerProvider() trace.TracerProvider {
	if t == nil {
		return nil
	}
	return t.tp
}

func (t *otelSDK) meterProvider() metric.MeterProvider {
	if t == nil {
		return nil
	}
	return t.mp
}

// shutdown writes what the providers hold (the last metrics) and closes
// the files. A nil t does nothing.
func (t *otelSDK) shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var err error
	if t.tp != nil {
		err = errors.Join(err, t.tp.Shutdown(ctx))
	}
	if t.mp != nil {
		err = errors.Join(err, t.mp.Shutdown(ctx))
	}
	return errors.Join(err, t.close())
}

func (t *otelSDK) close() error {
	var err error
	for _, f := range t.files {
		err = errors.Join(err, f.Close())
	}
	t.files = nil
	return err
}

// startWriter writes each span as it starts, through the exporter that
// writes it again as it ends (see above).
type startWriter struct{ exp sdktrace.SpanExporter }

func (w startWriter) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	_ = w.exp.ExportSpans(context.Background(), []sdktrace.ReadOnlySpan{s})
}

func (startWriter) OnEnd(sdktrace.ReadOnlySpan)      {}
func (startWriter) Shutdown(context.Context) error   { return nil }
func (startWriter) ForceFlush(context.Context) error { return nil }

// salePath is the spans file of the nth sale process (from 1) of a run
// traced to path: trace.jsonl gives trace.sale-1.jsonl.
func salePath(path string, n int) string {
	stem, ext := splitExt(path)
	return fmt.Sprintf("%s.sale-%d%s", stem, n, ext)
}

// metricsPath is the metrics file beside a spans file: trace.jsonl gives
// trace.metrics.jsonl.
func metricsPath(spansPath string) string {
	stem, ext := splitExt(spansPath)
	return stem + ".metrics" + ext
}

func splitExt(path string) (stem, ext string) {
	ext = filepath.Ext(path)
	if ext == "" {
		ext = ".jsonl"
		return path, ext
	}
	return strings.TrimSuffix(path, ext), ext
}

// removeSaleFiles removes the sale processes' files that an earlier run
// traced to path left, so that the files beside path are this run's only.
// It removes only names that [salePath] and [metricsPath] make.
func removeSaleFiles(path string) error {
	stem, ext := splitExt(path)
	matches, err := filepath.Glob(stem + ".sale-*")
	if err != nil {
		return err
	}
	ours := regexp.MustCompile(`^` + regexp.QuoteMeta(filepath.Base(stem)) + `\.sale-[0-9]+(\.metrics)?` + regexp.QuoteMeta(ext) + `$`)
	for _, m := range matches {
		if ours.MatchString(filepath.Base(m)) {
			if err := os.Remove(m); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}
