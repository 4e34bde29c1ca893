package command_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/internal/telemetry"
	"github.com/cairn-es/cairn/internal/testrig/oteltest"
	"github.com/cairn-es/cairn/retry"
)

// tracedAccounts returns a store and a bus over it whose spans and metrics
// rec records. Deposit is registered with the codec as "account.deposit",
// so spans and metrics name it so; Withdraw is not, and is named by its Go
// type.
func tracedAccounts(t *testing.T, rec *oteltest.Recorder, opts command.Options) (*memory.Store, *command.Bus) {
	t.Helper()
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[Deposited](reg, "account.deposited", 1))
	require.NoError(t, codec.Register[Withdrawn](reg, "account.withdrawn", 1))
	require.NoError(t, codec.Register[Deposit](reg, "account.deposit", 1))
	typ, err := aggregate.NewType[Account]("account", aggregate.Options[Account]{}, accountBindings...)
	require.NoError(t, err)
	opts.TracerProvider, opts.MeterProvider = rec.TracerProvider, rec.MeterProvider
	opts.Retry = retry.Policy{Attempts: opts.Retry.Attempts, Initial: time.Microsecond, Max: time.Microsecond}
	b := command.New(store, reg, opts)
	require.NoError(t, command.Route[Deposit](b, typ))
	require.NoError(t, command.Route[Withdraw](b, typ))
	return store, b
}

// one returns the one ended span called name.
func one(t *testing.T, rec *oteltest.Recorder, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	spans := rec.Named(name)
	require.Len(t, spans, 1, "spans called %q", name)
	return spans[0]
}

func attr(t *testing.T, s sdktrace.ReadOnlySpan, key attribute.Key) attribute.Value {
	t.Helper()
	v, ok := oteltest.Attr(s, key)
	require.True(t, ok, "span %q has no %s", s.Name(), key)
	return v
}

// storedContext returns the span context that the events of stream record.
func storedContexts(t *testing.T, store eventstore.Store, stream string) []trace.SpanContext {
	t.Helper()
	var out []trace.SpanContext
	for e, err := range store.ReadStream(context.Background(), stream, eventstore.Forward(0)) {
		require.NoError(t, err)
		out = append(out, telemetry.SpanContextOf(e.Metadata))
	}
	return out
}

func TestDispatchIsOneSpanWithLoadDecideAndAppendInside(t *testing.T) {
	rec := oteltest.New(t)
	store, b := tracedAccounts(t, rec, command.Options{})
	ctx := context.Background()

	_, err := b.Dispatch(ctx, command.Message{ID: "m1", CorrelationID: "flow-1", Command: Deposit{AccountID: "a1", Amount: 5}})
	require.NoError(t, err)

	dispatch := one(t, rec, "dispatch account.deposit")
	assert.Equal(t, trace.SpanKindInternal, dispatch.SpanKind())
	assert.False(t, dispatch.Parent().IsValid(), "the dispatch is the outermost span")
	assert.Equal(t, "account.deposit", attr(t, dispatch, telemetry.CommandTypeKey).AsString(), "the codec's name, not the Go type's")
	assert.Equal(t, "m1", attr(t, dispatch, telemetry.CommandIDKey).AsString())
	assert.Equal(t, "account", attr(t, dispatch, telemetry.AggregateKey).AsString())
	assert.Equal(t, "account-a1", attr(t, dispatch, telemetry.StreamKey).AsString())
	assert.Equal(t, "flow-1", attr(t, dispatch, telemetry.MessagingConversationIDKey).AsString())
	assert.Equal(t, "handled", attr(t, dispatch, telemetry.OutcomeKey).AsString())
	assert.EqualValues(t, 1, attr(t, dispatch, telemetry.AttemptKey).AsInt64())
	_, dup := oteltest.Attr(dispatch, telemetry.DuplicateKey)
	assert.False(t, dup)
	assert.Equal(t, codes.Unset, dispatch.Status().Code)

	load, decide, appended := one(t, rec, "load account"), one(t, rec, "decide account.deposit"), one(t, rec, "append account")
	for _, s := range []sdktrace.ReadOnlySpan{load, decide, appended} {
		assert.Equal(t, dispatch.SpanContext().SpanID(), s.Parent().SpanID(), "%s is a child of the dispatch", s.Name())
		assert.Equal(t, dispatch.SpanContext().TraceID(), s.SpanContext().TraceID())
	}
	assert.Equal(t, trace.SpanKindInternal, load.SpanKind())
	assert.Equal(t, trace.SpanKindInternal, decide.SpanKind())
	assert.Equal(t, trace.SpanKindClient, appended.SpanKind())
	assert.False(t, attr(t, load, "cairn.cached").AsBool(), "the first load reads the store")
	assert.Equal(t, "account-a1", attr(t, load, telemetry.StreamKey).AsString())
	assert.Equal(t, "account", attr(t, appended, telemetry.DBCollectionNameKey).AsString())

	stored := storedContexts(t, store, "account-a1")
	require.Len(t, stored, 1)
	assert.Equal(t, appended.SpanContext().SpanID(), stored[0].SpanID(), "the event records the append span's context")
	assert.Equal(t, appended.SpanContext().TraceID(), stored[0].TraceID())

	rec.Reset()
	_, err = b.Dispatch(ctx, command.Message{ID: "m2", Command: Deposit{AccountID: "a1", Amount: 5}})
	require.NoError(t, err)
	assert.True(t, attr(t, one(t, rec, "load account"), "cairn.cached").AsBool(), "the second dispatch takes the cached aggregate")
	stored = storedContexts(t, store, "account-a1")
	require.Len(t, stored, 2)
	assert.Equal(t, one(t, rec, "append account").SpanContext().SpanID(), stored[1].SpanID(), "each command's events record their own append")
	assert.NotEqual(t, stored[0].TraceID(), stored[1].TraceID(), "two dispatches, two traces")
}

func TestARedeliveredCommandKeepsItsFirstContextAndIsMarkedDuplicate(t *testing.T) {
	rec := oteltest.New(t)
	store, b := tracedAccounts(t, rec, command.Options{})
	ctx := context.Background()
	msg := command.Message{ID: "m1", Command: Deposit{AccountID: "a1", Amount: 5}}

	_, err := b.Dispatch(ctx, msg)
	require.NoError(t, err)
	first := one(t, rec, "append account")

	rec.Reset()
	res, err := b.Dispatch(ctx, msg)
	require.NoError(t, err)
	require.True(t, res.Duplicate)
	dispatch := one(t, rec, "dispatch account.deposit")
	assert.True(t, attr(t, dispatch, telemetry.DuplicateKey).AsBool())
	assert.Equal(t, "duplicate", attr(t, dispatch, telemetry.OutcomeKey).AsString())
	assert.Empty(t, rec.Named("append account"), "a duplicate appends nothing")
	require.Len(t, dispatch.Links(), 1, "a redelivery links to where its command took effect")
	assert.Equal(t, first.SpanContext().SpanID(), dispatch.Links()[0].SpanContext.SpanID())

	stored := storedContexts(t, store, "account-a1")
	require.Len(t, stored, 1)
	assert.Equal(t, first.SpanContext().SpanID(), stored[0].SpanID(), "the events keep the context of the append that stored them")
}

// A contested counter: its handler first lets test code append to its
// stream through another bus, so that the dispatch's append meets a newer
// version, as when two processes race.
type (
	Contested struct{ N int }
	Poke      struct {
		ID        string
		interfere func()
	}
	Tick   struct{ ID string }
	Poked  struct{}
	Ticked struct{}
)

func (c Poke) AggregateID() string { return c.ID }
func (c Tick) AggregateID() string { return c.ID }

func (s *Contested) poke(_ context.Context, c Poke) ([]any, error) {
	if c.interfere != nil {
		c.interfere()
	}
	return []any{Poked{}}, nil
}
func (s *Contested) tick(context.Context, Tick) ([]any, error) { return []any{Ticked{}}, nil }
func (s *Contested) poked(Poked)                               { s.N++ }
func (s *Contested) ticked(Ticked)                             { s.N++ }

// contestedBuses returns two buses on one store, the first traced by rec.
func contestedBuses(t *testing.T, rec *oteltest.Recorder, attempts int, mw ...command.Middleware) (traced, other *command.Bus) {
	t.Helper()
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[Poked](reg, "contested.poked", 1))
	require.NoError(t, codec.Register[Ticked](reg, "contested.ticked", 1))
	typ, err := aggregate.NewType[Contested]("contested", aggregate.Options[Contested]{},
		aggregate.Handles((*Contested).poke), aggregate.Handles((*Contested).tick),
		aggregate.Applies((*Contested).poked), aggregate.Applies((*Contested).ticked))
	require.NoError(t, err)
	fast := retry.Policy{Attempts: attempts, Initial: time.Microsecond, Max: time.Microsecond}
	traced = command.New(store, reg, command.Options{Retry: fast, Middleware: mw, TracerProvider: rec.TracerProvider, MeterProvider: rec.MeterProvider})
	other = command.New(store, reg, command.Options{Retry: fast})
	for _, b := range []*command.Bus{traced, other} {
		require.NoError(t, command.Route[Poke](b, typ))
		require.NoError(t, command.Route[Tick](b, typ))
	}
	return traced, other
}

func TestVersionConflictsAreRetryEventsOnTheDispatchAndCounted(t *testing.T) {
	rec := oteltest.New(t)
	// A middleware with a span of its own: the retries still go on the
	// dispatch span, and the steps nest under the middleware's span.
	var mwSpan trace.SpanID
	mw := func(next command.Handler) command.Handler {
		return command.HandlerFunc(func(ctx context.Context, msg *command.Message) (command.Result, error) {
			ctx, span := rec.TracerProvider.Tracer("mw").Start(ctx, "middleware")
			defer span.End()
			mwSpan = span.SpanContext().SpanID()
			return next.Dispatch(ctx, msg)
		})
	}
	b, other := contestedBuses(t, rec, 5, mw)
	ctx := context.Background()
	interfered := 0
	interfere := func() {
		if interfered < 2 {
			interfered++
			_, err := other.Dispatch(context.Background(), command.Message{Command: Tick{ID: "x"}})
			require.NoError(t, err)
		}
	}

	res, err := b.Dispatch(ctx, command.Message{ID: "p1", Command: Poke{ID: "x", interfere: interfere}})
	require.NoError(t, err)
	require.Equal(t, 3, res.Attempts, "two conflicts, then the append went through")

	dispatch := one(t, rec, "dispatch command_test.Poke")
	assert.Equal(t, "command_test.Poke", attr(t, dispatch, telemetry.CommandTypeKey).AsString(), "a type the codec does not name is named by its Go type")
	assert.EqualValues(t, 3, attr(t, dispatch, telemetry.AttemptKey).AsInt64())
	assert.Equal(t, "handled", attr(t, dispatch, telemetry.OutcomeKey).AsString())
	var retries []sdktrace.Event
	for _, e := range dispatch.Events() {
		if e.Name == "retry" {
			retries = append(retries, e)
		}
	}
	require.Len(t, retries, 2, "one retry event per conflict, on the dispatch span")
	for i, e := range retries {
		attrs := attribute.NewSet(e.Attributes...)
		next, _ := attrs.Value(telemetry.AttemptKey)
		assert.EqualValues(t, i+2, next.AsInt64(), "the attempt that follows")
		kind, _ := attrs.Value(telemetry.ErrorTypeKey)
		assert.Equal(t, "*eventstore.WrongVersionError", kind.AsString())
	}
	loads := rec.Named("load contested")
	require.Len(t, loads, 3, "one load per attempt")
	for _, s := range append(loads, rec.Named("append contested")...) {
		assert.Equal(t, mwSpan, s.Parent().SpanID(), "the steps nest in the middleware's span")
	}
	assert.Len(t, rec.Named("append contested"), 3, "every attempt appended, two of them refused")
	assert.Equal(t, mwSpan, one(t, rec, "middleware").SpanContext().SpanID())
	assert.Equal(t, dispatch.SpanContext().SpanID(), one(t, rec, "middleware").Parent().SpanID(), "middleware runs inside the dispatch span")

	kind := []attribute.KeyValue{telemetry.CommandTypeKey.String("command_test.Poke"), telemetry.AggregateKey.String("contested")}
	n, ok := rec.Int64(t, "cairn.command.retries", kind...)
	require.True(t, ok)
	assert.EqualValues(t, 2, n)
	n, _ = rec.Int64(t, "cairn.commands", append(kind, telemetry.OutcomeKey.String("handled"))...)
	assert.EqualValues(t, 1, n)

	// Conflicts that outlast the attempts: conflicted, an error.
	rec.Reset()
	interfered = -10
	_, err = b.Dispatch(ctx, command.Message{ID: "p2", Command: Poke{ID: "x", interfere: interfere}})
	require.ErrorIs(t, err, command.ErrContention)
	dispatch = one(t, rec, "dispatch command_test.Poke")
	assert.Equal(t, "conflicted", attr(t, dispatch, telemetry.OutcomeKey).AsString())
	assert.Equal(t, "*command.ContentionError", attr(t, dispatch, telemetry.ErrorTypeKey).AsString())
	assert.Equal(t, codes.Error, dispatch.Status().Code)
	n, _ = rec.Int64(t, "cairn.command.retries", kind...)
	assert.EqualValues(t, 2+4, n, "five attempts are four retries")
	n, _ = rec.Int64(t, "cairn.commands", append(kind, telemetry.OutcomeKey.String("conflicted"))...)
	assert.EqualValues(t, 1, n)
}

func TestARejectionIsAnOutcomeNotAFailure(t *testing.T) {
	rec := oteltest.New(t)
	store, b := tracedAccounts(t, rec, command.Options{})
	ctx := context.Background()

	res, err := b.Dispatch(ctx, command.Message{ID: "w1", Command: Withdraw{AccountID: "a1", Amount: 5}})
	require.ErrorIs(t, err, ErrInsufficientFunds)
	require.True(t, res.Rejected)
	dispatch := one(t, rec, "dispatch command_test.Withdraw")
	assert.Equal(t, "rejected", attr(t, dispatch, telemetry.OutcomeKey).AsString())
	assert.Equal(t, codes.Unset, dispatch.Status().Code, "a rejection is the command's answer, not an error of the service")
	_, hasType := oteltest.Attr(dispatch, telemetry.ErrorTypeKey)
	assert.False(t, hasType)
	assert.Equal(t, codes.Unset, one(t, rec, "decide command_test.Withdraw").Status().Code)
	assert.Empty(t, rec.Named("append account"), "a rejection not recorded appends nothing")

	// Recorded, the rejection is appended under an append span, whose
	// context it records; its redelivery is a duplicate.
	rec.Reset()
	_, err = b.Dispatch(ctx, command.Message{ID: "w2", Command: Withdraw{AccountID: "a1", Amount: 5}, RecordRejection: true})
	require.ErrorIs(t, err, ErrInsufficientFunds)
	appended := one(t, rec, "append account")
	dispatch = one(t, rec, "dispatch command_test.Withdraw")
	assert.Equal(t, dispatch.SpanContext().SpanID(), appended.Parent().SpanID())
	assert.Equal(t, "rejected", attr(t, dispatch, telemetry.OutcomeKey).AsString())
	stored := storedContexts(t, store, "account-a1")
	require.Len(t, stored, 1)
	assert.Equal(t, appended.SpanContext().SpanID(), stored[0].SpanID())

	rec.Reset()
	_, err = b.Dispatch(ctx, command.Message{ID: "w2", Command: Withdraw{AccountID: "a1", Amount: 5}, RecordRejection: true})
	require.ErrorIs(t, err, command.ErrRecordedRejection)
	dispatch = one(t, rec, "dispatch command_test.Withdraw")
	assert.Equal(t, "duplicate", attr(t, dispatch, telemetry.OutcomeKey).AsString(), "the rejection was counted when it was decided")
	assert.True(t, attr(t, dispatch, telemetry.DuplicateKey).AsBool())
}

func TestCommandMetricsCountAKnownLoad(t *testing.T) {
	rec := oteltest.New(t)
	_, b := tracedAccounts(t, rec, command.Options{Middleware: []command.Middleware{command.Validating()}})
	ctx := context.Background()
	for _, id := range []string{"d1", "d2", "d3", "d4", "d5", "d6", "d7"} {
		_, err := b.Dispatch(ctx, command.Message{ID: id, Command: Deposit{AccountID: "a1", Amount: 1}})
		require.NoError(t, err)
	}
	for _, id := range []string{"w1", "w2"} {
		_, err := b.Dispatch(ctx, command.Message{ID: id, Command: Withdraw{AccountID: "a1", Amount: 100}})
		require.ErrorIs(t, err, ErrInsufficientFunds)
	}
	for _, id := range []string{"d1", "d2", "d3"} {
		res, err := b.Dispatch(ctx, command.Message{ID: id, Command: Deposit{AccountID: "a1", Amount: 1}})
		require.NoError(t, err)
		require.True(t, res.Duplicate)
	}
	_, err := b.Dispatch(ctx, command.Message{ID: "v1", Command: invalidDeposit{}})
	require.ErrorIs(t, err, command.ErrNoRoute)

	deposit := telemetry.CommandTypeKey.String("account.deposit")
	withdraw := telemetry.CommandTypeKey.String("command_test.Withdraw")
	account := telemetry.AggregateKey.String("account")
	for _, c := range []struct {
		kind    attribute.KeyValue
		outcome string
		want    int64
	}{{deposit, "handled", 7}, {withdraw, "rejected", 2}, {deposit, "duplicate", 3}} {
		n, ok := rec.Int64(t, "cairn.commands", c.kind, account, telemetry.OutcomeKey.String(c.outcome))
		require.True(t, ok, "%s %s", c.kind.Value.AsString(), c.outcome)
		assert.Equal(t, c.want, n, "%s %s", c.kind.Value.AsString(), c.outcome)
		assert.EqualValues(t, c.want, rec.Count(t, "cairn.command.duration", c.kind, telemetry.OutcomeKey.String(c.outcome)))
	}
	n, ok := rec.Int64(t, "cairn.commands", telemetry.CommandTypeKey.String("command_test.invalidDeposit"), telemetry.OutcomeKey.String("failed"))
	require.True(t, ok, "an unrouted command is counted as failed")
	assert.EqualValues(t, 1, n)
	_, ok = rec.Int64(t, "cairn.commands", deposit, telemetry.OutcomeKey.String("failed"))
	assert.False(t, ok, "no deposit failed")

	// The metrics carry no high-cardinality attribute: no stream, no ID.
	for _, sm := range rec.Collect(t).ScopeMetrics {
		for _, m := range sm.Metrics {
			assert.NotContains(t, []string{"cairn.stream", "cairn.command_id"}, m.Name)
		}
	}
	assert.Len(t, rec.Named("dispatch account.deposit"), 10)
}

// invalidDeposit is a command with no route.
type invalidDeposit struct{}

func (invalidDeposit) AggregateID() string { return "a1" }

func TestAValidatorsRefusalIsRejected(t *testing.T) {
	rec := oteltest.New(t)
	_, b := tracedAccounts(t, rec, command.Options{Middleware: []command.Middleware{command.Validating()}})
	_, err := b.Dispatch(context.Background(), command.Message{ID: "x", Command: selfChecked{}})
	var invalid *command.ValidationError
	require.ErrorAs(t, err, &invalid)
	n, ok := rec.Int64(t, "cairn.commands", telemetry.CommandTypeKey.String("command_test.selfChecked"), telemetry.OutcomeKey.String("rejected"))
	require.True(t, ok)
	assert.EqualValues(t, 1, n)
	assert.Equal(t, codes.Unset, one(t, rec, "dispatch command_test.selfChecked").Status().Code)
}

// selfChecked is a command that always fails its own validation.
type selfChecked struct{}

func (selfChecked) AggregateID() string { return "a1" }
func (selfChecked) Validate() error     { return errors.New("never valid") }

func TestAForgedTraceContextInExtraIsRefused(t *testing.T) {
	rec := oteltest.New(t)
	store, b := tracedAccounts(t, rec, command.Options{})
	forged := map[string]string{eventstore.TraceParentKey: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	_, err := b.Dispatch(context.Background(), command.Message{ID: "m1", Extra: forged, Command: Deposit{AccountID: "a1", Amount: 5}})
	var invalid *eventstore.InvalidArgumentError
	require.ErrorAs(t, err, &invalid)
	assert.Equal(t, "Message.Extra", invalid.Field)
	assert.Empty(t, storedContexts(t, store, "account-a1"), "nothing was appended")
	dispatch := one(t, rec, "dispatch account.deposit")
	assert.Equal(t, "failed", attr(t, dispatch, telemetry.OutcomeKey).AsString())
	assert.Equal(t, codes.Error, dispatch.Status().Code)
	assert.Equal(t, "*eventstore.InvalidArgumentError", attr(t, dispatch, telemetry.ErrorTypeKey).AsString())
}

func TestLogsInsideADispatchNameItsTrace(t *testing.T) {
	rec := oteltest.New(t)
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	_, b := tracedAccounts(t, rec, command.Options{Middleware: []command.Middleware{command.Logging(log)}})
	_, err := b.Dispatch(context.Background(), command.Message{ID: "m1", Command: Deposit{AccountID: "a1", Amount: 5}})
	require.NoError(t, err)
	dispatch := one(t, rec, "dispatch account.deposit")
	assert.Contains(t, buf.String(), `"trace_id":"`+dispatch.SpanContext().TraceID().String()+`"`)
	assert.Contains(t, buf.String(), `"span_id":"`+dispatch.SpanContext().SpanID().String()+`"`)
	assert.Contains(t, buf.String(), `"command_id":"m1"`)
}

func TestUnsampledDispatchesAreCountedButNotTraced(t *testing.T) {
	rec := oteltest.New(t) // for its meter provider
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()), sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	store, _ := tracedAccounts(t, rec, command.Options{})
	b2 := command.New(store, codecFor(t), command.Options{TracerProvider: tp, MeterProvider: rec.MeterProvider})
	typ, err := aggregate.NewType[Account]("account", aggregate.Options[Account]{}, accountBindings...)
	require.NoError(t, err)
	require.NoError(t, command.Route[Deposit](b2, typ))

	_, err = b2.Dispatch(context.Background(), command.Message{ID: "m1", Command: Deposit{AccountID: "a1", Amount: 5}})
	require.NoError(t, err)
	assert.Empty(t, spans.Ended())
	assert.Empty(t, spans.Started(), "no child span is started under a dispatch that does not record")
	stored := storedContexts(t, store, "account-a1")
	require.Len(t, stored, 1)
	assert.False(t, stored[0].IsValid(), "no trace context is written while nothing records")
	n, _ := rec.Int64(t, "cairn.commands", telemetry.OutcomeKey.String("handled"))
	assert.EqualValues(t, 1, n, "metrics do not depend on sampling")

	// Without any provider (the global one, a no-op here) too.
	b3 := command.New(store, codecFor(t), command.Options{})
	require.NoError(t, command.Route[Deposit](b3, typ))
	_, err = b3.Dispatch(context.Background(), command.Message{ID: "m2", Command: Deposit{AccountID: "a1", Amount: 5}})
	require.NoError(t, err)
	stored = storedContexts(t, store, "account-a1")
	require.Len(t, stored, 2)
	assert.False(t, stored[1].IsValid())
}

func codecFor(t *testing.T) *codec.Registry {
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[Deposited](reg, "account.deposited", 1))
	require.NoError(t, codec.Register[Withdrawn](reg, "account.withdrawn", 1))
	return reg
}
