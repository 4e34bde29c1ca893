package flowtest

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/testrig/reservation"
	"github.com/cairn-es/cairn/saga"
)

// Tally counts orders the way Jepsen counts operations.
type Tally struct {
	// Attempts: orders placed (every order of the run).
	Attempts int
	// Acknowledged: orders whose placement the bus acknowledged to the
	// placing worker before a crash (with an acks file; else every
	// order).
	Acknowledged int
	// Applied: orders whose every effect is in the store exactly once and
	// that ended as reservation.Expect says.
	Applied int
	// Lost: orders with an effect missing (an event of a stream, a saga
	// step, a command the saga sent, a read model row).
	Lost int
	// Duplicated: orders with an effect twice (an event, a message a saga
	// step handled, a command applied, an event the read model counted).
	Duplicated int
	// Unexpected: orders with an effect that no run of the flow makes, or
	// an end other than the expected one.
	Unexpected int
	// Problems says what is wrong with each order that is not Applied.
	Problems []string
}

// Add adds o's counts to t.
func (t *Tally) Add(o Tally) {
	t.Attempts += o.Attempts
	t.Acknowledged += o.Acknowledged
	t.Applied += o.Applied
	t.Lost += o.Lost
	t.Duplicated += o.Duplicated
	t.Unexpected += o.Unexpected
	t.Problems = append(t.Problems, o.Problems...)
}

// Valid reports whether every order was applied and none lost,
// duplicated or unexpected.
func (t Tally) Valid() bool {
	return t.Lost == 0 && t.Duplicated == 0 && t.Unexpected == 0 && t.Applied == t.Attempts
}

// problems collects what is wrong with one order, by kind.
type problems struct {
	lost, duplicated, unexpected []string
}

func (p *problems) add(kind *[]string, format string, args ...any) {
	*kind = append(*kind, fmt.Sprintf(format, args...))
}

// Check checks what the flow left in s for orders: every order ended as
// reservation.Expect says; its order, reservation and payment streams hold
// exactly reservation.Events' counts of events; its saga instance handled
// each message once, in the steps the flow takes, and each command a step
// sent took effect exactly once (one append carrying its command ID); and,
// with readModel, the read model counted each of the order's events once.
// acked, when not nil, is the set of orders acknowledged (see
// Config.Acks); nil counts every order acknowledged.
func Check(ctx context.Context, s eventstore.Store, orders []Order, acked map[string]bool, readModel bool) (Tally, error) {
	reg, err := Registry()
	if err != nil {
		return Tally{}, err
	}
	check, err := reservation.NewChecker(s, reg)
	if err != nil {
		return Tally{}, err
	}
	bus := command.New(s, reg, command.Options{})
	if err := reservation.Route(bus); err != nil {
		return Tally{}, err
	}
	sale, err := reservation.NewSale(reg)
	if err != nil {
		return Tally{}, err
	}
	runner, err := saga.NewRunner(sale, s, bus, saga.RunnerOptions{})
	if err != nil {
		return Tally{}, err
	}
	var counts map[string]int
	if readModel {
		if counts, err = ReadModelCounts(ctx, s); err != nil {
			return Tally{}, err
		}
	}
	var t Tally
	for _, o := range orders {
		t.Attempts++
		if acked == nil || acked[o.ID] {
			t.Acknowledged++
		}
		var p problems
		if err := checkOrder(ctx, s, check, runner, o, counts, &p); err != nil {
			return t, fmt.Errorf("flowtest: checking order %s: %w", o.ID, err)
		}
		switch {
		case len(p.duplicated) > 0:
			t.Duplicated++
		case len(p.lost) > 0:
			t.Lost++
		case len(p.unexpected) > 0:
			t.Unexpected++
		default:
			t.Applied++
			continue
		}
		all := slices.Concat(p.lost, p.duplicated, p.unexpected)
		t.Problems = append(t.Problems, fmt.Sprintf("order %s (seats %d, amount %d): %s", o.ID, o.Seats, o.AmountCents, strings.Join(all, "; ")))
	}
	return t, nil
}

// checkOrder finds what is wrong with order o.
func checkOrder(ctx context.Context, s eventstore.Store, check *reservation.Checker, runner *saga.Runner[reservation.Sale], o Order, counts map[string]int, p *problems) error {
	want := reservation.Expect(o.Seats, o.AmountCents)
	end, err := check.End(ctx, o.ID)
	if err != nil {
		return err
	}
	if end.Confirmed != want.Confirmed || end.Rejected != want.Rejected || end.Reason != want.Reason {
		p.add(&p.unexpected, "order ended confirmed=%t rejected=%t reason=%q, not confirmed=%t rejected=%t reason=%q",
			end.Confirmed, end.Rejected, end.Reason, want.Confirmed, want.Rejected, want.Reason)
	}
	if end.Reserved != want.Reserved || end.Cancelled != want.Cancelled || end.Paid != want.Paid {
		p.add(&p.unexpected, "reserved=%t cancelled=%t paid=%t, not %t %t %t",
			end.Reserved, end.Cancelled, end.Paid, want.Reserved, want.Cancelled, want.Paid)
	}

	// The aggregates' streams: how many events, and which commands made
	// them (command ID -> appends).
	wo, wr, wp := reservation.Events(o.Seats, o.AmountCents)
	appends := make(map[string]int)
	for stream, n := range map[string]int{"order-" + o.ID: wo, "seats-" + o.ID: wr, "payment-" + o.ID: wp} {
		got := 0
		last := ""
		for ev, err := range s.ReadStream(ctx, stream, eventstore.Forward(0)) {
			if err != nil {
				return err
			}
			got++
			if id := ev.Metadata.CommandID; id != last { // one append's events are adjacent
				appends[id]++
				last = id
			}
			if counts != nil && slices.Contains(EventTypes, ev.Type) {
				switch c := counts[ev.ID.String()]; {
				case c == 0:
					p.add(&p.lost, "the read model did not count %s #%d (%s)", stream, ev.Version, ev.Type)
				case c > 1:
					p.add(&p.duplicated, "the read model counted %s #%d (%s) %d times", stream, ev.Version, ev.Type, c)
				}
			}
		}
		switch {
		case got < n:
			p.add(&p.lost, "%s holds %d events, not %d", stream, got, n)
		case got > n:
			p.add(&p.duplicated, "%s holds %d events, not %d", stream, got, n)
		}
	}
	switch n := appends["place-"+o.ID]; {
	case n == 0:
		p.add(&p.lost, "the placement made no append")
	case n > 1:
		p.add(&p.duplicated, "the placement made %d appends", n)
	}

	// The saga instance: each message handled once, in the steps the flow
	// takes, and each command it sent appended once.
	handled := make(map[string]int)
	steps := 0
	for step, err := range runner.History(ctx, o.ID) {
		if err != nil {
			return err
		}
		switch step.Kind {
		case "event", "deadline", "rejected":
		default:
			p.add(&p.unexpected, "saga step %d is %q", step.Version, step.Kind)
			continue
		}
		steps++
		key := fmt.Sprintf("%s %s/%d %s %s", step.Kind, step.Source, step.Sequence, step.Deadline, step.Command)
		if handled[key]++; handled[key] == 2 {
			p.add(&p.duplicated, "the saga handled %s twice", key)
		}
		for _, c := range step.Commands {
			switch n := appends[c.ID]; {
			case n == 0:
				p.add(&p.lost, "command %s (%s) of saga step %d made no append", c.ID, c.Type, step.Version)
			case n > 1:
				p.add(&p.duplicated, "command %s (%s) of saga step %d made %d appends", c.ID, c.Type, step.Version, n)
			}
			delete(appends, c.ID)
		}
	}
	wantSteps := 3 // placed, reserved, then paid, refused or past the deadline
	if !want.Reserved {
		wantSteps = 2 // placed, no seats
	}
	switch {
	case steps < wantSteps:
		p.add(&p.lost, "the saga took %d steps, not %d", steps, wantSteps)
	case steps > wantSteps:
		p.add(&p.unexpected, "the saga took %d steps, not %d", steps, wantSteps)
	}
	delete(appends, "place-"+o.ID)
	for id, n := range appends {
		p.add(&p.unexpected, "%d appends by command %q, which no saga step sent", n, id)
	}
	return nil
}
