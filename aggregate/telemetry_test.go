package aggregate_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/internal/busrepo"
	"github.com/cairn-es/cairn/internal/telemetry"
	"github.com/cairn-es/cairn/internal/testrig/oteltest"
)

func tracedTallies(t *testing.T) (*oteltest.Recorder, *memory.Store, *aggregate.Repository[Tally, *Tally]) {
	t.Helper()
	rec := oteltest.New(t)
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	repo, err := aggregate.NewRepository(store, newRegistry(t), tallyType(t, 0),
		aggregate.RepositoryOptions{TracerProvider: rec.TracerProvider, MeterProvider: rec.MeterProvider})
	require.NoError(t, err)
	return rec, store, repo
}

func TestADirectSaveIsItsOwnAppendSpanWhoseContextTheEventsRecord(t *testing.T) {
	rec, store, repo := tracedTallies(t)
	ctx := context.Background()
	inst, err := repo.Load(ctx, "a")
	require.NoError(t, err)
	_, err = repo.Save(ctx, inst, []any{Added{N: 2}, Added{N: 3}}, aggregate.SaveOptions{CommandID: "c1",
		Metadata: eventstore.Metadata{Extra: map[string]string{"origin": "migration"}}})
	require.NoError(t, err)

	spans := rec.Named("append tally")
	require.Len(t, spans, 1)
	s := spans[0]
	assert.False(t, s.Parent().IsValid(), "a Save outside any span is the outermost span")
	assert.Equal(t, trace.SpanKindClient, s.SpanKind())
	v, _ := oteltest.Attr(s, telemetry.DBBatchSizeKey)
	assert.EqualValues(t, 2, v.AsInt64())
	v, _ = oteltest.Attr(s, telemetry.StreamKey)
	assert.Equal(t, "tally-a", v.AsString())
	v, _ = oteltest.Attr(s, telemetry.DBSystemNameKey)
	assert.Equal(t, "memory", v.AsString())

	n := 0
	for e, err := range store.ReadStream(ctx, "tally-a", eventstore.Forward(0)) {
		require.NoError(t, err)
		n++
		sc := telemetry.SpanContextOf(e.Metadata)
		assert.Equal(t, s.SpanContext().SpanID(), sc.SpanID(), "every event of the append records its span")
		assert.Equal(t, "migration", e.Metadata.Extra["origin"], "the caller's metadata is kept")
	}
	assert.Equal(t, 2, n)
	assert.EqualValues(t, 1, rec.Count(t, "db.client.operation.duration", telemetry.DBCollectionNameKey.String("tally")))

	// Inside a span of the caller's, the append is its child.
	parent, span := rec.TracerProvider.Tracer("t").Start(ctx, "migrate")
	_, err = repo.Save(parent, inst, []any{Added{N: 1}}, aggregate.SaveOptions{})
	require.NoError(t, err)
	span.End()
	spans = rec.Named("append tally")
	require.Len(t, spans, 2)
	assert.Equal(t, span.SpanContext().SpanID(), spans[1].Parent().SpanID())
}

func TestAFailedAppendIsAnErrorSpan(t *testing.T) {
	rec, _, repo := tracedTallies(t)
	ctx := context.Background()
	stale, err := repo.Load(ctx, "a")
	require.NoError(t, err)
	fresh, err := repo.Load(ctx, "a")
	require.NoError(t, err)
	_, err = repo.Save(ctx, fresh, []any{Added{N: 1}}, aggregate.SaveOptions{})
	require.NoError(t, err)
	_, err = repo.Save(ctx, stale, []any{Added{N: 1}}, aggregate.SaveOptions{})
	require.ErrorIs(t, err, eventstore.ErrWrongVersion)

	spans := rec.Named("append tally")
	require.Len(t, spans, 2)
	assert.Equal(t, codes.Error, spans[1].Status().Code)
	v, _ := oteltest.Attr(spans[1], telemetry.ErrorTypeKey)
	assert.Equal(t, "*eventstore.WrongVersionError", v.AsString())
	assert.EqualValues(t, 1, rec.Count(t, "db.client.operation.duration", telemetry.ErrorTypeKey.String("*eventstore.WrongVersionError")))
}

func TestABusSaveIsTracedOnlyInsideARecordingSpan(t *testing.T) {
	rec, store, repo := tracedTallies(t)
	ctx := context.Background()
	inst, err := repo.Load(ctx, "a")
	require.NoError(t, err)
	_, err = busOf(repo).Save(ctx, inst, []any{Added{N: 1}}, busrepo.SaveOptions{CommandID: "c1", CommandType: "tally.add"})
	require.NoError(t, err)
	assert.Empty(t, rec.Named("append tally"), "a step of a dispatch that is not traced starts no span")

	parent, span := rec.TracerProvider.Tracer("t").Start(ctx, "dispatch")
	_, err = busOf(repo).SaveRejection(parent, inst, busrepo.Rejection{Reason: "no"}, busrepo.SaveOptions{CommandID: "c2"})
	require.NoError(t, err)
	span.End()
	spans := rec.Named("append tally")
	require.Len(t, spans, 1)
	assert.Equal(t, span.SpanContext().SpanID(), spans[0].Parent().SpanID())

	var stored []eventstore.Event
	for e, err := range store.ReadStream(ctx, "tally-a", eventstore.Forward(0)) {
		require.NoError(t, err)
		stored = append(stored, e)
	}
	require.Len(t, stored, 2)
	assert.NotContains(t, stored[0].Metadata.Extra, eventstore.TraceParentKey)
	assert.Equal(t, "tally.add", stored[0].Metadata.Extra[busrepo.CommandTypeKey])
	assert.Equal(t, spans[0].SpanContext().SpanID(), telemetry.SpanContextOf(stored[1].Metadata).SpanID(), "the recorded rejection records its append")
}

func TestSaveRefusesCairnsOwnMetadataKeys(t *testing.T) {
	_, store, repo := tracedTallies(t)
	ctx := context.Background()
	inst, err := repo.Load(ctx, "a")
	require.NoError(t, err)
	for _, key := range []string{eventstore.TraceParentKey, busrepo.CommandTypeKey} {
		_, err = repo.Save(ctx, inst, []any{Added{N: 1}}, aggregate.SaveOptions{
			Metadata: eventstore.Metadata{Extra: map[string]string{key: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}})
		var invalid *eventstore.InvalidArgumentError
		require.ErrorAs(t, err, &invalid, key)
		assert.Contains(t, invalid.Error(), key)
	}
	for _, err := range store.ReadStream(ctx, "tally-a", eventstore.Forward(0)) {
		require.NoError(t, err)
		t.Fatal("nothing is appended")
	}
}
