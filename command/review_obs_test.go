package command_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"iter"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/command/commandtest"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/internal/telemetry"
	"github.com/cairn-es/cairn/internal/testrig/oteltest"
)

// downStore is a store whose appends and stream reads fail while down.
type downStore struct {
	eventstore.Store
	mu                 sync.Mutex
	appendDown, readDn bool
}

var errDown = errors.New("store down")

func (s *downStore) set(appendDown, readDown bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appendDown, s.readDn = appendDown, readDown
}

func (s *downStore) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	s.mu.Lock()
	down := s.appendDown
	s.mu.Unlock()
	if down {
		return eventstore.AppendResult{}, errDown
	}
	return s.Store.Append(ctx, stream, expected, events...)
}

func (s *downStore) ReadStream(ctx context.Context, stream string, opts eventstore.ReadOptions) iter.Seq2[eventstore.Event, error] {
	s.mu.Lock()
	down := s.readDn
	s.mu.Unlock()
	if down {
		return func(yield func(eventstore.Event, error) bool) { yield(eventstore.Event{}, errDown) }
	}
	return s.Store.ReadStream(ctx, stream, opts)
}

// reviewBus returns a bus of counters over store, traced by tp and
// measured by rec's meter provider.
func reviewBus(t *testing.T, store eventstore.Store, tp trace.TracerProvider, rec *oteltest.Recorder, opts command.Options) *command.Bus {
	t.Helper()
	reg, err := crashRegistry()
	require.NoError(t, err)
	typ, err := aggregate.NewType[commandtest.Counter]("counter", aggregate.Options[commandtest.Counter]{}, commandtest.CounterBindings()...)
	require.NoError(t, err)
	opts.TracerProvider, opts.MeterProvider = tp, rec.MeterProvider
	b := command.New(store, reg, opts)
	require.NoError(t, command.Route[commandtest.Increment](b, typ))
	require.NoError(t, command.Route[commandtest.Explode](b, typ))
	require.NoError(t, command.Route[commandtest.Reject](b, typ))
	return b
}

// sumInt64 sums every data point of the int64 sum called name.
func sumInt64(t *testing.T, rec *oteltest.Recorder, name string) (total int64, byAttrs map[string]int64) {
	t.Helper()
	byAttrs = map[string]int64{}
	for _, sm := range rec.Collect(t).ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			d, ok := m.Data.(metricdata.Sum[int64])
			require.True(t, ok, "%s is an int64 sum", name)
			for _, p := range d.DataPoints {
				total += p.Value
				v, _ := p.Attributes.Value(telemetry.OutcomeKey)
				byAttrs[v.AsString()] += p.Value
			}
		}
	}
	return total, byAttrs
}

// Review finding 3: a middleware that panics (a Handler, as the bus's own
// dispatch is) leaves the dispatch span open forever and the dispatch
// uncounted: Dispatch ends its span and counts after the middleware
// chain returns, not in a defer, so a panic skips both. The panic itself
// still reaches the caller (as before tracing); only the telemetry is lost.
func TestReviewAPanickingMiddlewareStillEndsAndCountsTheDispatch(t *testing.T) {
	tp, spans := oteltest.Counting(t)
	rec := oteltest.New(t)
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	boom := func(next command.Handler) command.Handler {
		return command.HandlerFunc(func(ctx context.Context, msg *command.Message) (command.Result, error) {
			panic("middleware bug")
		})
	}
	b := reviewBus(t, store, tp, rec, command.Options{Middleware: []command.Middleware{boom}})

	require.Panics(t, func() {
		_, _ = b.Dispatch(context.Background(), command.Message{ID: "m", Command: commandtest.Increment{ID: "a"}})
	}, "the panic still reaches the caller")
	assert.Empty(t, spans.Names(), "the dispatch span must end when the dispatch panics")
	total, _ := sumInt64(t, rec, "cairn.commands")
	assert.EqualValues(t, 1, total, "the dispatch must be counted (as failed)")
}

// Review finding 4, kept as slog's rule: a user's logger whose handler has
// a group open (logger.WithGroup("app")) gets trace_id and span_id inside
// that group ("app.trace_id"), as every attribute added to its records;
// no wrapper can take a group back out of a handler that has it.
// docs/observability.md says so: give Cairn a logger without an open
// group where log-to-trace correlation looks for a top-level trace_id.
func TestReviewTraceIDsFollowAUsersGroupedLogger(t *testing.T) {
	rec := oteltest.New(t)
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	var buf bytes.Buffer
	user := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})).WithGroup("app").With("svc", "billing")
	b := reviewBus(t, store, rec.TracerProvider, rec, command.Options{Middleware: []command.Middleware{command.Logging(user)}})
	_, err := b.Dispatch(context.Background(), command.Message{ID: "m", Command: commandtest.Increment{ID: "a"}})
	require.NoError(t, err)
	line, _, _ := strings.Cut(buf.String(), "\n")
	require.NotEmpty(t, line)
	var got struct {
		App map[string]any `json:"app"`
	}
	require.NoError(t, json.Unmarshal([]byte(line), &got))
	dispatch := rec.Named("dispatch commandtest.Increment")
	require.Len(t, dispatch, 1)
	assert.Equal(t, dispatch[0].SpanContext().TraceID().String(), got.App["trace_id"], "trace_id in the user's group of %s", line)
}

// Review finding 7: the bus checks Message.Extra for reserved "cairn."
// keys before its middleware runs, and appends as Cairn's trusted writer
// after: a middleware that adds to msg.Extra (one that copies a request's
// headers or a broker message's attributes into the metadata, say) writes
// a forged cairn.traceparent into the events, which telemetry.Inject then
// keeps ("a context md already holds is kept") and every consumer links
// to. The check should run on the message the route receives (in
// Bus.dispatch), or the route should drop reserved keys.
func TestReviewMiddlewareCannotForgeTheStoredTraceContext(t *testing.T) {
	rec := oteltest.New(t)
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	forged := "00-0badc0ffee0badc0ffee0badc0ffee0-0badc0ffee0badc0-01"
	headers := func(next command.Handler) command.Handler {
		return command.HandlerFunc(func(ctx context.Context, msg *command.Message) (command.Result, error) {
			if msg.Extra == nil {
				msg.Extra = map[string]string{}
			}
			msg.Extra[eventstore.TraceParentKey] = forged // from an incoming request's metadata
			return next.Dispatch(ctx, msg)
		})
	}
	b := reviewBus(t, store, rec.TracerProvider, rec, command.Options{Middleware: []command.Middleware{headers}})
	_, err := b.Dispatch(context.Background(), command.Message{ID: "m", Command: commandtest.Increment{ID: "a"}})
	if err != nil {
		require.ErrorIs(t, err, eventstore.ErrInvalidArgument, "refused as a reserved key")
		return
	}
	for e, err := range store.ReadStream(context.Background(), "counter-a", eventstore.Forward(0)) {
		require.NoError(t, err)
		assert.NotEqual(t, forged, e.Metadata.Extra[eventstore.TraceParentKey], "the stored trace context is Cairn's, not a forged one")
	}
}
