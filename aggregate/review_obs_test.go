package aggregate_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/testrig/oteltest"
)

// reviewCarts returns a repository of carts over a fresh memory store,
// traced by tp (a no-op provider for tracing that is off).
func reviewCarts(t *testing.T, tp trace.TracerProvider) *aggregate.Repository[Cart, *Cart] {
	t.Helper()
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[ItemAdded](reg, "cart.item_added", 1))
	require.NoError(t, codec.Register[CheckedOut](reg, "cart.checked_out", 1))
	typ, err := aggregate.NewType[Cart]("cart", aggregate.Options[Cart]{}, aggregate.Handles((*Cart).Add),
		aggregate.Handles((*Cart).Checkout), aggregate.Applies((*Cart).Added), aggregate.Applies((*Cart).CheckedOut))
	require.NoError(t, err)
	repo, err := aggregate.NewRepository(store, reg, typ, aggregate.RepositoryOptions{TracerProvider: tp})
	require.NoError(t, err)
	return repo
}

// itemOf returns an ItemAdded whose JSON encoding ({"Item":"..."}) is
// size bytes.
func itemOf(size int) ItemAdded { return ItemAdded{Item: strings.Repeat("x", size-len(`{"Item":""}`))} }

// longTraceState is a tracestate as W3C allows it: 32 members, each with
// a long value (OpenTelemetry's parser takes values of up to 256 chars).
func longTraceState(t *testing.T) trace.TraceState {
	t.Helper()
	members := make([]string, 32)
	for i := range members {
		members[i] = fmt.Sprintf("vendor%02d=%s", i, strings.Repeat("v", 250))
	}
	ts, err := trace.ParseTraceState(strings.Join(members, ","))
	require.NoError(t, err)
	return ts
}

// underRemoteSpan returns ctx under a sampled remote span context with ts:
// what a service's HTTP middleware leaves in the request's context.
func underRemoteSpan(ctx context.Context, ts trace.TraceState) context.Context {
	return trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true}))
}

// Review finding 1: tracing changes behaviour at the store's size limit.
// An event whose data and metadata are exactly storekit.MaxEventSize is
// saved with tracing off, and refused with tracing on: the append span's
// traceparent (and tracestate) are added to the metadata after the
// caller's event was sized, and the store counts them against the limit.
func TestReviewAnEventAtTheSizeLimitSavesTheSameWithTracingOnAsOff(t *testing.T) {
	ctx := context.Background()
	ev := itemOf(storekit.MaxEventSize)

	off := reviewCarts(t, noop.NewTracerProvider())
	inst, err := off.Load(ctx, "c1")
	require.NoError(t, err)
	_, err = off.Save(ctx, inst, []any{ev}, aggregate.SaveOptions{})
	require.NoError(t, err, "with tracing off, an event of exactly the limit is saved")

	on := reviewCarts(t, oteltest.New(t).TracerProvider)
	inst, err = on.Load(ctx, "c1")
	require.NoError(t, err)
	_, err = on.Save(ctx, inst, []any{ev}, aggregate.SaveOptions{})
	require.NoError(t, err, "with tracing on, the same event must be saved the same")
}

// Review finding 2: a caller's long tracestate (W3C: 32 members) is copied
// into every event's metadata, so that an event 8 KiB under the limit,
// saved with tracing off, is refused under the caller's span.
func TestReviewACallersLongTraceStateDoesNotMakeASaveFail(t *testing.T) {
	ev := itemOf(storekit.MaxEventSize - 8<<10)

	off := reviewCarts(t, noop.NewTracerProvider())
	ctx := underRemoteSpan(context.Background(), longTraceState(t))
	inst, err := off.Load(ctx, "c1")
	require.NoError(t, err)
	_, err = off.Save(ctx, inst, []any{ev}, aggregate.SaveOptions{})
	require.NoError(t, err)

	on := reviewCarts(t, oteltest.New(t).TracerProvider)
	inst, err = on.Load(ctx, "c1")
	require.NoError(t, err)
	_, err = on.Save(ctx, inst, []any{ev}, aggregate.SaveOptions{})
	require.NoError(t, err, "tracing on must not turn a save that fits into an %v", eventstore.ErrInvalidArgument)
}
