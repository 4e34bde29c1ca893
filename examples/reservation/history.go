package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/examples/reservation/domain"
	"github.com/cairn-es/cairn/saga"
)

// history is what the store holds, recomputed from every stored event by
// the code of one version of the model. Version 2 reading version 1's
// events through its upcasters must find the same history version 1 found.
type history struct {
	// Orders counts the orders placed; Ends counts them by how they ended
	// ("confirmed", "rejected (no seats)", ... or "open").
	Orders int            `json:"orders"`
	Ends   map[string]int `json:"ends"`
	// SaleEnds counts the sales by the outcome their own state records,
	// read through the saga's state upcaster; "open" for a sale that runs.
	SaleEnds map[string]int `json:"sale_ends"`
	// DeadlinesFired counts the sale steps that were a payment deadline
	// firing; DeadlinesLate those of them that fired for a sale whose
	// payment had been taken or refused, in time, but which had not heard
	// of it yet (it was down or behind when the deadline fell due): they
	// changed nothing.
	DeadlinesFired int `json:"deadlines_fired"`
	DeadlinesLate  int `json:"deadlines_late"`
	// Seats counts the reservation events by kind; Payments the payment
	// events ("accepted", ...), and PaidCents the money taken.
	Seats     map[string]int `json:"seats"`
	Payments  map[string]int `json:"payments"`
	PaidCents int64          `json:"paid_cents"`
	// Events counts the stored events by stream category ("order",
	// "seats", "payment", "finance", "saga:sale").
	Events map[string]int `json:"events"`

	ends map[string]end // by order ID
}

// readHistory reads every stored event with svc's model, and each sale's
// steps and state through s.
func readHistory(ctx context.Context, svc *service, s *sale) (*history, error) {
	h := &history{Ends: map[string]int{}, SaleEnds: map[string]int{}, Seats: map[string]int{}, Payments: map[string]int{},
		Events: map[string]int{}, ends: map[string]end{}}
	var orderIDs []string
	for ev, err := range svc.store.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		if err != nil {
			return nil, err
		}
		if codec.IsReserved(ev.Type) {
			continue // Cairn's own record, such as a payment's recorded refusal: no event of the model
		}
		category, _, _ := strings.Cut(ev.StreamID, "-")
		h.Events[category]++
		if strings.HasPrefix(ev.StreamID, saga.StreamPrefix) {
			continue // a sale's step: read below, through the saga
		}
		values, err := svc.reg.Decode(ev)
		if err != nil {
			return nil, err
		}
		for _, d := range values {
			switch e := d.Value.(type) {
			case domain.OrderPlaced:
				h.ends[e.OrderID] = end{Status: "open"}
				orderIDs = append(orderIDs, e.OrderID)
			case domain.OrderConfirmed:
				h.ends[e.OrderID] = end{Status: "confirmed"}
			case domain.OrderRejected:
				h.ends[e.OrderID] = end{Status: "rejected", Reason: e.Reason}
			case domain.SeatsReserved:
				h.Seats["reserved"]++
			case domain.SeatsNotReserved:
				h.Seats["not reserved"]++
			case domain.ReservationCancelled:
				h.Seats["cancelled"]++
			default:
				what, cents, ok := svc.model.payment(d.Value)
				if !ok {
					return nil, fmt.Errorf("%s #%d: %T is no event of this service", ev.StreamID, ev.Version, d.Value)
				}
				h.Payments[what]++
				h.PaidCents += cents
			}
		}
	}
	h.Orders = len(orderIDs)
	for _, id := range orderIDs {
		h.Ends[h.ends[id].String()]++
		outcome, err := s.outcome(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("sale %s: %w", id, err)
		}
		if outcome == "" {
			outcome = "open"
		}
		h.SaleEnds[outcome]++
		for step, err := range s.runner.History(ctx, id) {
			if err != nil {
				return nil, fmt.Errorf("sale %s: %w", id, err)
			}
			if step.Kind == "deadline" {
				h.DeadlinesFired++
				if h.ends[id].Reason != domain.ReasonNoPayment {
					h.DeadlinesLate++
				}
			}
		}
	}
	return h, nil
}
