// Package sagatest tests sagas the way they run: a [Scenario] gives a saga
// type some events, makes something happen (an event, time passing, a
// command rejected), and checks what the saga decided (the commands it
// sends, the deadlines it sets, whether it completed), through the same
// engine that runs sagas in production, on an in-memory store with a
// [Clock] the test moves.
//
//	sagatest.New(t, sale).
//		Given(OrderPlaced{OrderID: "o-1"}).
//		When(SeatsReserved{OrderID: "o-1"}).
//		ThenCommands(MakePayment{OrderID: "o-1"}).
//		ThenDeadlines("payment")
//
// [CheckHistory] runs histories recorded by older code through the
// current one, to catch a model change that decides differently.
package sagatest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/retry"
	"github.com/cairn-es/cairn/saga"
)

// Start is when a scenario's clock starts.
var Start = time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)

// Scenario is one test of a saga type. Its methods fail the test (with
// tb.Fatalf for a scenario that cannot go on, tb.Errorf for a check that
// does not hold) and return the scenario, so that they chain.
type Scenario[S any] struct {
	tb     testing.TB
	ctx    context.Context
	store  *memory.Store
	runner *saga.Runner[S]
	clock  *Clock
	// sources numbers the messages of the scenario: each event comes from
	// a source of its own, so that none waits for another.
	sources int
	// instances are the instances the scenario has touched, in order.
	instances []string
	// when are the steps of the last When, per instance.
	when map[string][]saga.Step
	// whenOrder is the order of the instances the last When stepped.
	whenOrder []string
	// parked describes the messages the last When parked, with their
	// errors, until a Then method has reported them.
	parked []string
}

// New returns a scenario of saga type t, which it runs (and so ends t's
// set-up: make a fresh Type per test). It sends no command: the commands
// a step decides are what the Then methods check.
func New[S any](tb testing.TB, t *saga.Type[S]) *Scenario[S] {
	tb.Helper()
	s := &Scenario[S]{tb: tb, ctx: context.Background(), store: memory.New(), clock: NewClock(Start)}
	tb.Cleanup(func() { _ = s.store.Close() })
	r, err := saga.NewRunner(t, s.store, nil, saga.RunnerOptions{Clock: s.clock, Retry: retry.Policy{Attempts: 1},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		tb.Fatalf("sagatest: %v", err)
	}
	s.runner = r
	return s
}

// Runner returns the runner under the scenario, for what the Then methods
// do not cover (Explain, History, Retry).
func (s *Scenario[S]) Runner() *saga.Runner[S] { return s.runner }

// Clock returns the scenario's clock.
func (s *Scenario[S]) Clock() *Clock { return s.clock }

// Given delivers events that happened before, in order. Whatever their
// steps decide is not checked. Each event comes from a source of its own
// ("sagatest-1", "sagatest-2", ..., at sequence 0), so that none waits
// for another or is taken for a duplicate of another; to test those, name
// the source and sequence with [Scenario.GivenDelivered].
func (s *Scenario[S]) Given(events ...any) *Scenario[S] {
	s.tb.Helper()
	for _, e := range events {
		s.deliver(s.nextSource(e))
	}
	return s
}

// GivenDelivered delivers deliveries that happened before, in order, each
// from the source and at the sequence it names, as a broker would: two of
// one source and sequence are one message delivered twice, and a later
// sequence waits for the earlier ones.
func (s *Scenario[S]) GivenDelivered(deliveries ...saga.Delivery) *Scenario[S] {
	s.tb.Helper()
	for _, d := range deliveries {
		s.deliver(d)
	}
	return s
}

// When delivers one event, whose steps the Then methods check. It comes
// from a source of its own, as Given's do.
func (s *Scenario[S]) When(event any) *Scenario[S] {
	s.tb.Helper()
	return s.WhenDelivered(s.nextSource(event))
}

// WhenDelivered delivers d from the source and at the sequence it names
// (see [Scenario.GivenDelivered]); the Then methods check the steps it
// caused: none when it was a duplicate, or held for an earlier sequence.
func (s *Scenario[S]) WhenDelivered(d saga.Delivery) *Scenario[S] {
	s.tb.Helper()
	before := s.versions()
	id := s.deliver(d)
	s.collect(before, []string{id})
	return s
}

// WhenTimeElapses moves the clock by d and fires the deadlines that fall
// due, whose steps the Then methods check.
func (s *Scenario[S]) WhenTimeElapses(d time.Duration) *Scenario[S] {
	s.tb.Helper()
	before := s.versions()
	s.clock.Advance(d)
	if _, err := s.runner.FireDue(s.ctx); err != nil {
		s.tb.Fatalf("sagatest: firing deadlines after %s: %v", d, err)
	}
	s.collect(before, s.instances)
	return s
}

// WhenRejected feeds back the rejection of cmd, a command that an earlier
// step sent (the last one equal to cmd), with reason as its aggregate's
// error: the saga's OnRejected handler runs, and the Then methods check
// its step.
func (s *Scenario[S]) WhenRejected(cmd command.Command, reason error) *Scenario[S] {
	s.tb.Helper()
	for i := len(s.instances) - 1; i >= 0; i-- {
		id := s.instances[i]
		steps := s.history(id)
		for j := len(steps) - 1; j >= 0; j-- {
			for _, c := range steps[j].Commands {
				if reflect.DeepEqual(c.Command, cmd) {
					before := s.versions()
					if _, err := s.runner.Reject(s.ctx, id, c.ID, reason); err != nil {
						s.tb.Fatalf("sagatest: rejecting %#v: %v", cmd, err)
					}
					s.collect(before, []string{id})
					return s
				}
			}
		}
	}
	s.tb.Fatalf("sagatest: WhenRejected(%#v): no step sent that command", cmd)
	return s
}

// ThenCommands checks the commands that the last When's steps sent, in
// order.
func (s *Scenario[S]) ThenCommands(want ...command.Command) *Scenario[S] {
	s.tb.Helper()
	s.reportParked()
	var got []command.Command
	for _, id := range s.whenOrder {
		for _, st := range s.when[id] {
			for _, c := range st.Commands {
				cmd, _ := c.Command.(command.Command)
				got = append(got, cmd)
			}
		}
	}
	if !reflect.DeepEqual(normalize(got), normalize(want)) {
		s.tb.Errorf("sagatest: commands sent:\n%s", diff(lines(want), lines(got)))
	}
	return s
}

// ThenNoCommands checks that the last When's steps sent no command.
func (s *Scenario[S]) ThenNoCommands() *Scenario[S] {
	s.tb.Helper()
	return s.ThenCommands()
}

// ThenDeadlines checks the names of the deadlines pending, soonest first,
// on the instance the last When stepped.
func (s *Scenario[S]) ThenDeadlines(names ...string) *Scenario[S] {
	s.tb.Helper()
	s.reportParked()
	x := s.explain()
	var got []string
	for _, d := range x.Deadlines {
		got = append(got, d.Name)
	}
	if !slices.Equal(got, names) {
		s.tb.Errorf("sagatest: deadlines pending on instance %q:\n%s", x.Instance, diff(names, got))
	}
	return s
}

// ThenCompleted checks that the instance the last When stepped is
// complete.
func (s *Scenario[S]) ThenCompleted() *Scenario[S] {
	s.tb.Helper()
	s.reportParked()
	if x := s.explain(); !x.Completed {
		s.tb.Errorf("sagatest: instance %q is not complete (last step: %s)", x.Instance, x.LastStep.Kind)
	}
	return s
}

// ThenNotCompleted checks that the instance the last When stepped goes on.
func (s *Scenario[S]) ThenNotCompleted() *Scenario[S] {
	s.tb.Helper()
	s.reportParked()
	if x := s.explain(); x.Completed {
		s.tb.Errorf("sagatest: instance %q is complete", x.Instance)
	}
	return s
}

// ThenParked checks that the last When's message failed and is parked on
// its instance, with an error containing text.
func (s *Scenario[S]) ThenParked(text string) *Scenario[S] {
	s.tb.Helper()
	s.parked = nil
	x := s.explain()
	switch {
	case x.Parked == nil:
		s.tb.Errorf("sagatest: instance %q has no parked message", x.Instance)
	case !strings.Contains(x.Parked.Error, text):
		s.tb.Errorf("sagatest: instance %q parked its message with %q, which does not contain %q", x.Instance, x.Parked.Error, text)
	}
	return s
}

// ThenState hands check the state of the instance the last When stepped.
func (s *Scenario[S]) ThenState(check func(tb testing.TB, state *S)) *Scenario[S] {
	s.tb.Helper()
	s.reportParked()
	check(s.tb, s.explain().State)
	return s
}

// nextSource returns event as a delivery from a source of its own.
func (s *Scenario[S]) nextSource(event any) saga.Delivery {
	s.sources++
	return saga.Delivery{Source: fmt.Sprintf("sagatest-%d", s.sources), Event: event}
}

// deliver hands d to the runner and returns its instance.
func (s *Scenario[S]) deliver(d saga.Delivery) string {
	s.tb.Helper()
	id, err := s.runner.InstanceFrom(d.Event, saga.Origin{Source: d.Source, Sequence: d.Sequence, Metadata: d.Metadata})
	if err != nil {
		s.tb.Fatalf("sagatest: %#v: %v", d.Event, err)
	}
	if _, err := s.runner.Deliver(s.ctx, d); err != nil {
		s.tb.Fatalf("sagatest: delivering %#v from %q, #%d: %v", d.Event, d.Source, d.Sequence, err)
	}
	if !slices.Contains(s.instances, id) {
		s.instances = append(s.instances, id)
	}
	return id
}

// versions returns the number of steps of every instance touched so far.
func (s *Scenario[S]) versions() map[string]int {
	out := make(map[string]int, len(s.instances))
	for _, id := range s.instances {
		out[id] = len(s.history(id))
	}
	return out
}

// collect keeps the steps that ids took since before, and what they
// parked.
func (s *Scenario[S]) collect(before map[string]int, ids []string) {
	s.when, s.whenOrder, s.parked = make(map[string][]saga.Step), nil, nil
	for _, id := range ids {
		steps := s.history(id)
		if n := before[id]; n < len(steps) {
			s.when[id] = steps[n:]
			s.whenOrder = append(s.whenOrder, id)
		}
		if !slices.ContainsFunc(s.when[id], func(st saga.Step) bool { return st.Kind == "parked" }) {
			continue
		}
		x, err := s.runner.Explain(s.ctx, id)
		switch {
		case err != nil:
			s.parked = append(s.parked, fmt.Sprintf("instance %q parked a message, and explaining it failed: %v", id, err))
		case x.Parked != nil:
			s.parked = append(s.parked, fmt.Sprintf("instance %q parked %s %s: %s", id, x.Parked.Kind, x.Parked.Type, x.Parked.Error))
		}
	}
}

// reportParked fails the test, once per When, when its message parked: a
// parked step decides nothing, so the other checks would only say what is
// missing, not why. [Scenario.ThenParked] expects it instead.
func (s *Scenario[S]) reportParked() {
	s.tb.Helper()
	if len(s.parked) > 0 {
		s.tb.Errorf("sagatest: the step failed and parked its message, so it decided nothing (ThenParked expects that): %s", strings.Join(s.parked, "; "))
		s.parked = nil
	}
}

func (s *Scenario[S]) history(id string) []saga.Step {
	s.tb.Helper()
	var out []saga.Step
	for st, err := range s.runner.History(s.ctx, id) {
		if err != nil {
			s.tb.Fatalf("sagatest: reading the history of instance %q: %v", id, err)
		}
		out = append(out, st)
	}
	return out
}

// explain returns the instance the last When stepped (or, if it stepped
// none, the last instance touched).
func (s *Scenario[S]) explain() saga.Explanation[S] {
	s.tb.Helper()
	id := ""
	switch {
	case len(s.whenOrder) > 0:
		id = s.whenOrder[len(s.whenOrder)-1]
	case len(s.instances) > 0:
		id = s.instances[len(s.instances)-1]
	default:
		s.tb.Fatalf("sagatest: no instance yet: Given or When an event first")
	}
	x, err := s.runner.Explain(s.ctx, id)
	if err != nil {
		s.tb.Fatalf("sagatest: explaining instance %q: %v", id, err)
	}
	return x
}

// normalize makes an empty list and none equal.
func normalize(cmds []command.Command) []command.Command {
	if len(cmds) == 0 {
		return nil
	}
	return cmds
}

func lines(cmds []command.Command) []string {
	out := make([]string, len(cmds))
	for i, c := range cmds {
		out[i] = fmt.Sprintf("%#v", c)
	}
	return out
}

// diff lays out what was expected beside what came, line by line, marking
// the lines that differ.
func diff(want, got []string) string {
	var b strings.Builder
	for i := range max(len(want), len(got)) {
		w, g := "(none)", "(none)"
		if i < len(want) {
			w = want[i]
		}
		if i < len(got) {
			g = got[i]
		}
		mark := "  "
		if w != g {
			mark = "! "
		}
		fmt.Fprintf(&b, "%s%d. want %s\n%s   got  %s\n", mark, i+1, w, mark, g)
	}
	if len(want) == 0 && len(got) == 0 {
		b.WriteString("  (none)\n")
	}
	return b.String()
}
