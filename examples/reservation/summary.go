package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/cairn-es/cairn/examples/reservation/domain"
)

// check returns an error when the run's numbers break a promise: every
// order ended as its inputs dictate, every command took effect once, every
// duplicate was absorbed, and the read models agree with the history.
func (r *result) check() error {
	h, earlier := r.history, r.earlier
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	var want [3]int
	for _, o := range r.orders {
		if got, exp := h.ends[o.ID], expect(o); got != exp {
			bad("order %s (%d seats, %d cents, pays %v) ended %s; it should have ended %s", o.ID, o.Seats, o.AmountCents, o.Pays, got, exp)
		}
		n, s, p := events(o)
		want[0], want[1], want[2] = want[0]+n, want[1]+s, want[2]+p
	}
	if n := h.Ends["open"]; n > 0 {
		bad("%d orders have not ended", n)
	}
	// The events this run stored are its orders' alone, unless it also
	// finished orders that an interrupted run left open.
	for i, category := range []string{domain.Orders.Name(), domain.Reservations.Name(), r.paymentCategory()} {
		if got := h.Events[category] - earlier.Events[category]; got != want[i] && earlier.Ends["open"] == 0 {
			bad("the run stored %d %s events; its orders make %d", got, category, want[i])
		}
	}
	if sales := saleEnds(h.Ends); !maps.Equal(sales, h.SaleEnds) {
		bad("the sales' own states say %v; the orders say %v", h.SaleEnds, sales)
	}
	timedOut := h.Ends[reason(domain.ReasonNoPayment)]
	if closed := h.DeadlinesFired - h.DeadlinesLate; closed != timedOut {
		bad("%d payment deadlines fired for %d orders with no payment in time", closed, timedOut)
	}
	if h.Payments["cancelled"] != timedOut {
		bad("%d payments were closed, for %d orders with no payment in time", h.Payments["cancelled"], timedOut)
	}
	if h.Payments["accepted"] != h.Ends["confirmed"] {
		bad("%d payments were taken, for %d confirmed orders", h.Payments["accepted"], h.Ends["confirmed"])
	}
	var listed, noSeats []string
	for _, n := range r.notReserved {
		listed = append(listed, n.OrderID)
	}
	for id, e := range h.ends {
		if e.Reason == domain.ReasonNoSeats {
			noSeats = append(noSeats, id)
		}
	}
	slices.Sort(listed)
	slices.Sort(noSeats)
	if !slices.Equal(listed, noSeats) {
		bad("the not-reserved list has %d orders; %d orders were refused seats", len(listed), len(noSeats))
	}
	q := r.queue
	if q.Applied != q.Messages {
		bad("%d client messages took effect; %d were sent", q.Applied, q.Messages)
	}
	if q.Duplicates != q.SentTwice+q.Crashed {
		bad("the bus absorbed %d duplicates; the queue made %d (%d sent twice, %d redelivered)", q.Duplicates, q.SentTwice+q.Crashed, q.SentTwice, q.Crashed)
	}
	if q.Refused > 0 {
		bad("%d client messages were refused", q.Refused)
	}
	if len(problems) > 0 {
		if len(problems) > 8 {
			problems = append(problems[:8], fmt.Sprintf("and %d more", len(problems)-8))
		}
		return fmt.Errorf("the run broke its promises:\n  %s", strings.Join(problems, "\n  "))
	}
	return nil
}

// paymentCategory is the category of the streams where the run's model
// keeps payments.
func (r *result) paymentCategory() string {
	if r.model == modelV2.name {
		return "finance"
	}
	return domain.Payments.Name()
}

// saleEnds says what the sales' states must say, given how the orders
// ended.
func saleEnds(orderEnds map[string]int) map[string]int {
	out := map[string]int{}
	for e, n := range orderEnds {
		status, reason, rejected := strings.Cut(strings.TrimSuffix(e, ")"), " (")
		switch {
		case rejected:
			out[domain.RejectedOutcome(reason)] += n
		default:
			out[status] += n
		}
	}
	return out
}

// print writes the summary.
func (r *result) print(w io.Writer) {
	h, earlier := r.history, r.earlier
	runEnds := map[string]int{}
	for _, o := range r.orders {
		runEnds[h.ends[o.ID].String()]++
	}
	fmt.Fprintf(w, "\n%s, this run: %d orders placed by concurrent clients in %s\n", r.model, len(r.orders), r.elapsed.Round(10e6))
	if r.savedBy != "" {
		how := ""
		if r.savedBy != r.model {
			how = fmt.Sprintf(" (%s's events and sale states read through %s's upcasters)", r.savedBy, r.model)
		}
		fmt.Fprintf(w, "  history      %d earlier orders read again by %s: the same as %s saved%s\n", earlier.Orders, r.model, r.savedBy, how)
	}
	if n := earlier.Ends["open"]; n > 0 {
		fmt.Fprintf(w, "  resumed      %d orders an interrupted run had left open, now all ended\n", n)
	}
	fmt.Fprintf(w, "  orders       %d confirmed, %d rejected: %d no seats, %d payment refused, %d no payment in time\n",
		runEnds["confirmed"], len(r.orders)-runEnds["confirmed"], runEnds[reason(domain.ReasonNoSeats)],
		runEnds[reason(domain.ReasonPaymentRefused)], runEnds[reason(domain.ReasonNoPayment)])
	q := r.queue
	fmt.Fprintf(w, "  queue        %d messages, %d deliveries: %d duplicates absorbed (%d sent twice, %d redelivered after a worker crashed),\n",
		q.Messages, q.Deliveries, q.Duplicates, q.SentTwice, q.Crashed)
	fmt.Fprintf(w, "               %d reorders repaired (an authorization before its order, kept until the sale asked), %d put back after contention\n",
		q.Reordered, q.PutBack)
	if r.killedAt >= 0 {
		fmt.Fprintf(w, "  sale         killed with SIGKILL mid-run (%d of %d client messages in, %d orders ended) and restarted;\n"+
			"               after the restart it dropped %d events it had handled before, and re-sent %d commands\n"+
			"               that the bus absorbed\n", r.killedAt, q.Messages, r.killedEnded, r.sale.Stats.Duplicates, r.sale.Resent)
	}
	fired, late := h.DeadlinesFired-earlier.DeadlinesFired, h.DeadlinesLate-earlier.DeadlinesLate
	fmt.Fprintf(w, "  deadlines    %d payment deadlines fired: %d closed a payment that never came", fired, fired-late)
	if late > 0 {
		fmt.Fprintf(w, ", %d fell due while the sale was down\n               or behind, and found the payment already taken or refused", late)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  not reserved %s (the read model: every run in ./data)\n", notReservedLine(r.notReserved))
	paid := h.PaidCents - earlier.PaidCents
	fmt.Fprintf(w, "  payments     %d taken (%d.%02d EUR), %d closed unpaid\n",
		h.Payments["accepted"]-earlier.Payments["accepted"], paid/100, paid%100, h.Payments["cancelled"]-earlier.Payments["cancelled"])
	var stored []string
	total, all := 0, 0
	for _, c := range slices.Sorted(maps.Keys(h.Events)) {
		if n := h.Events[c] - earlier.Events[c]; n > 0 {
			stored = append(stored, fmt.Sprintf("%d %s", n, c))
			total += n
		}
		all += h.Events[c]
	}
	fmt.Fprintf(w, "  events       %d stored by this run (%s); %d in the store, every run in ./data\n", total, strings.Join(stored, ", "), all)
	fmt.Fprintf(w, "every order ended as its inputs dictate, and every command took effect once\n")
}

func reason(r string) string { return end{"rejected", r}.String() }

// notReservedLine lists the customers of the not-reserved read model.
func notReservedLine(list []refusal) string {
	if len(list) == 0 {
		return "nobody"
	}
	counts := map[string]int{}
	for _, r := range list {
		counts[r.Customer]++
	}
	names := slices.Sorted(maps.Keys(counts))
	var parts []string
	for i, c := range names {
		if i == 6 {
			parts = append(parts, fmt.Sprintf("and %d more", len(names)-i))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%d)", c, counts[c]))
	}
	return fmt.Sprintf("%d orders from %d customers: %s", len(list), len(names), strings.Join(parts, ", "))
}
