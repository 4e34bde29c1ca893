// Package saga runs process managers: long-running flows that react to
// events from several aggregates and send commands to others, such as a
// sale that reserves seats, takes a payment, and confirms or rejects an
// order.
//
// A saga type is declared on a plain Go struct, its state, with event to
// command mappings:
//
//	sale, _ := saga.New[Sale]("sale", reg, saga.Options[Sale]{})
//	saga.On(sale, saga.Event[Sale, OrderPlaced]{
//		Instance: func(e OrderPlaced, _ eventstore.Metadata) string { return e.OrderID },
//		Starts:   true,
//		Handle: func(ctx context.Context, s *Sale, e OrderPlaced, out *saga.Output) error {
//			s.OrderID = e.OrderID
//			out.Send(MakeReservation{OrderID: e.OrderID, Seats: e.Seats})
//			out.ScheduleAfter("payment", 15*time.Minute, PaymentDue{})
//			return nil
//		},
//	})
//
// # Instances are event-sourced
//
// Each instance lives in a stream of its own, "saga:<type>-<instance ID>"
// (aggregate type names cannot contain ':', so no aggregate stream is ever
// named so). Handling one event is one append to that stream, expecting the
// version it loaded: a step record holding what was handled, the new state
// (encoded by the codec with its schema version, so saga state is upcast
// like events), the commands to send with their deterministic IDs, the
// pending deadlines, the per-source watermarks, the events held back and
// whether the instance completed. Loading an instance reads its latest
// record only.
//
// # Exactly once, in order
//
// Every message that reaches an instance has a source (the stream it was
// appended to, or the source a [Delivery] names) and a sequence in that
// source. The instance keeps, per source, the last sequence it handled: a
// message at or below it is a duplicate and is dropped. Messages from the
// event store arrive in each stream's order, with gaps where the saga maps
// only some of a stream's events; messages delivered from outside (see
// [Runner.Deliver]) are numbered 0, 1, 2, ... per source and instance, so a
// message above the next expected one is early: it is held, durably, in the
// instance's stream and handled when the gap fills, or when an operator
// releases the gap. Dedup memory is a few numbers per source: a watermark,
// at most 256 sequences handled out of order above it, and a pending mark.
//
// # Records by reference, problems per instance
//
// A step record keeps the stored events it takes by reference, and only a
// delivery's payload inline; each record is checked against [MaxStepSize]
// before its append. Anything that concerns one instance (a failing
// handler, a record too large, a command the bus keeps failing, a record of
// its stream that cannot be read) parks that instance, or its event as a
// dead letter, with a reason; the runner and every other instance go on.
// Operators act on what they saw: [Runner.Retry] and [Runner.Skip] name the
// parked message, [Runner.Release] the gap.
package saga
