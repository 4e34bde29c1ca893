// Package telemetry is what Cairn's packages share to trace and measure
// their work with OpenTelemetry: the tracer and meter a component resolves
// from its options, the names of attributes and instruments, the trace
// context events carry in their metadata, and the log keys.
//
// Only the OpenTelemetry API is used (trace, metric, propagation): a user
// who sets no provider gets the global ones, which do nothing until the
// service installs an SDK. Every hot path starts its span and then does
// attribute and link work only when the span records, so tracing that is
// off costs a no-op span and no more.
package telemetry

import (
	"reflect"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of every tracer and meter Cairn
// makes: what a backend shows as the library that produced a span.
const ScopeName = "github.com/cairn-es/cairn"

// Tracer is a component's tracer, and what it takes to tell cheaply that
// none of its spans can record now, so that the component starts none:
// starting a span on a tracer that cannot record still costs a few
// allocations, which a hot path (a dispatch, a catch-up in batches of one)
// would pay on every operation for nothing.
type Tracer struct {
	trace.Tracer
	// idle is the global provider as OpenTelemetry starts it, before a
	// service installs an SDK, when the component was given no provider
	// and found that one: while it is still the global provider, no span
	// can record. Nil when a provider was given (the global one passed
	// explicitly included, so that instrumentation that hooks the global
	// tracer itself still sees every span) or an SDK was installed first.
	idle trace.TracerProvider
	// silent is a no-op provider's tracer.
	silent bool
}

// NewTracer returns the tracer of tp, or of the global provider when tp is
// nil. The global provider's tracer forwards to whatever provider the
// service installs later with otel.SetTracerProvider.
func NewTracer(tp trace.TracerProvider) Tracer {
	var t Tracer
	if tp == nil {
		tp = otel.GetTracerProvider()
		if isGlobalDefault(tp) {
			t.idle = tp
		}
	}
	_, t.silent = tp.(tracenoop.TracerProvider)
	t.Tracer = tp.Tracer(ScopeName)
	return t
}

// Off reports whether no span of t can record now: its provider is a
// no-op, or the global one before a service installed an SDK.
func (t Tracer) Off() bool {
	return t.silent || (t.idle != nil && otel.GetTracerProvider() == t.idle)
}

// isGlobalDefault reports whether tp is OpenTelemetry's global provider
// before any SDK is installed: the API's internal delegating provider
// (otel.SetTracerProvider replaces it, so that otel.GetTracerProvider
// returns the SDK's from then on). Should the API move it, tp is taken for
// a provider of the service's and every span is started: slower, never
// wrong (a test in this package notices).
func isGlobalDefault(tp trace.TracerProvider) bool {
	t := reflect.TypeOf(tp)
	return t != nil && t.Kind() == reflect.Pointer && t.Elem().PkgPath() == "go.opentelemetry.io/otel/internal/global"
}

// Meter returns the meter of mp, or of the global provider when mp is nil.
func Meter(mp metric.MeterProvider) metric.Meter {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	return mp.Meter(ScopeName)
}

// Attribute keys. The OpenTelemetry messaging and database conventions name
// what they cover; Cairn's own keys start with "cairn.". High-cardinality
// keys (stream, version, position, IDs) go on spans only, never on metrics.
const (
	MessagingSystemKey         = attribute.Key("messaging.system")
	MessagingOperationNameKey  = attribute.Key("messaging.operation.name")
	MessagingOperationTypeKey  = attribute.Key("messaging.operation.type")
	MessagingDestinationKey    = attribute.Key("messaging.destination.name")
	MessagingConsumerGroupKey  = attribute.Key("messaging.consumer.group.name")
	MessagingMessageIDKey      = attribute.Key("messaging.message.id")
	MessagingConversationIDKey = attribute.Key("messaging.message.conversation_id")
	MessagingBatchCountKey     = attribute.Key("messaging.batch.message_count")
	DBSystemNameKey            = attribute.Key("db.system.name")
	DBOperationNameKey         = attribute.Key("db.operation.name")
	DBCollectionNameKey        = attribute.Key("db.collection.name")
	DBBatchSizeKey             = attribute.Key("db.operation.batch.size")
	ErrorTypeKey               = attribute.Key("error.type")

	StreamKey        = attribute.Key("cairn.stream")
	VersionKey       = attribute.Key("cairn.version")
	PositionKey      = attribute.Key("cairn.position")
	EventTypeKey     = attribute.Key("cairn.event.type")
	CommandIDKey     = attribute.Key("cairn.command_id")
	CommandTypeKey   = attribute.Key("cairn.command.type")
	AggregateKey     = attribute.Key("cairn.aggregate")
	AttemptKey       = attribute.Key("cairn.attempt")
	DuplicateKey     = attribute.Key("cairn.duplicate")
	OutcomeKey       = attribute.Key("cairn.outcome")
	ConsumerKey      = attribute.Key("cairn.consumer")
	SagaTypeKey      = attribute.Key("cairn.saga.type")
	SagaInstanceKey  = attribute.Key("cairn.saga.instance")
	SagaSourceKey    = attribute.Key("cairn.saga.source")
	SagaSequenceKey  = attribute.Key("cairn.saga.sequence")
	DeadlineNameKey  = attribute.Key("cairn.deadline.name")
	SegmentKey       = attribute.Key("cairn.segment")
	CachedKey        = attribute.Key("cairn.cached")
	RebuildEventsKey = attribute.Key("cairn.rebuild.events")
	DeadLetterKey    = attribute.Key("cairn.dead_letter")
	PartKey          = attribute.Key("cairn.part")
)

// MessagingSystem is the messaging.system of every span and metric of
// Cairn's messaging: its own, as the conventions allow for a system they
// do not list.
var MessagingSystem = MessagingSystemKey.String("cairn")

// DBSystem is the db.system.name of store: the conventions' name for
// PostgreSQL and SQLite, Cairn's kind for the others ("memory",
// "kurrentdb"), and "other" for a store that does not say what it is.
func DBSystem(store any) attribute.KeyValue {
	d, ok := store.(interface{ Kind() (string, int) })
	if !ok {
		return DBSystemNameKey.String("other")
	}
	switch name, _ := d.Kind(); name {
	case "postgres":
		return DBSystemNameKey.String("postgresql")
	case "":
		return DBSystemNameKey.String("other")
	default:
		return DBSystemNameKey.String(name)
	}
}

// Buckets of the duration histograms, in seconds: the conventions' for
// database operations (db.client.operation.duration) and for messaging
// (messaging.process.duration, messaging.client.operation.duration).
var (
	DBDurationBuckets        = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10}
	MessagingDurationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
)
