package commandtest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/internal/check"
)

// Counter is the suite's aggregate: a number that commands increase.
type Counter struct {
	ID    string `json:"id"`
	Count int    `json:"count"`
	// Applied counts the events applied, to tell a snapshot's state from a
	// replay's.
	Applied int `json:"applied"`
	// Token is the token of the last Stamped event.
	Token string `json:"token"`
}

// Commands of the suite.
type (
	// Increment adds By (1 when zero) in one event.
	Increment struct {
		ID string
		By int
	}
	// IncrementTwice adds 1 twice, in two events of one append.
	IncrementTwice struct{ ID string }
	// Reject is refused with ErrRejected.
	Reject struct{ ID string }
	// Explode panics in Handle.
	Explode struct{ ID string }
	// Nothing is accepted and produces no event.
	Nothing struct{ ID string }
	// CheckCount is accepted, producing no event, when the count is Want,
	// and refused with ErrWrongCount otherwise: a decision that depends on
	// the state and appends nothing.
	CheckCount struct {
		ID   string
		Want int
	}
	// Stamp records a new random token: a decision that differs each time
	// it is made, as one that reads the clock or makes a UUID does. Handle
	// calls Decided, when set, after deciding and before returning, so that
	// a test can hold racing dispatches between decision and append.
	Stamp struct {
		ID      string
		Decided func()
	}
	// IncrementAt adds 1 when the count is At, and is refused with
	// ErrWrongCount otherwise: a command that succeeds once and would be
	// refused if it were decided again later.
	IncrementAt struct {
		ID string
		At int
	}
	// Echo records the current token again: a decision that shows which
	// state it was made from.
	Echo struct{ ID string }
)

// AggregateID implements command.Command.
func (c Increment) AggregateID() string { return c.ID }

// AggregateID implements command.Command.
func (c IncrementTwice) AggregateID() string { return c.ID }

// AggregateID implements command.Command.
func (c Reject) AggregateID() string { return c.ID }

// AggregateID implements command.Command.
func (c Explode) AggregateID() string { return c.ID }

// AggregateID implements command.Command.
func (c Nothing) AggregateID() string { return c.ID }

// AggregateID implements command.Command.
func (c CheckCount) AggregateID() string { return c.ID }

// AggregateID implements command.Command.
func (c Stamp) AggregateID() string { return c.ID }

// AggregateID implements command.Command.
func (c Echo) AggregateID() string { return c.ID }

// AggregateID implements command.Command.
func (c IncrementAt) AggregateID() string { return c.ID }

// Events of the suite.
type (
	// Incremented records an increase.
	Incremented struct {
		By int `json:"by"`
	}
	// Poisoned is registered but Counter does not apply it.
	Poisoned struct{}
	// Bomb makes Counter's Apply panic.
	Bomb struct{}
	// Stamped records a token that Stamp made up.
	Stamped struct {
		Token string `json:"token"`
	}
	// Echoed records the token the counter held when Echo was decided.
	Echoed struct {
		Token string `json:"token"`
	}
)

// ErrRejected is Counter's rejection of Reject.
var ErrRejected = errors.New("counter: rejected")

// ErrWrongCount is Counter's rejection of a CheckCount that does not match.
var ErrWrongCount = errors.New("counter: wrong count")

// CounterBindings returns what a Counter decides and applies: a handler
// for each command of the suite and an applier for each event but
// Poisoned, for aggregate.NewType.
func CounterBindings() []aggregate.Binding[Counter] {
	return []aggregate.Binding[Counter]{
		aggregate.Handles((*Counter).increment),
		aggregate.Handles((*Counter).incrementTwice),
		aggregate.Handles((*Counter).reject),
		aggregate.Handles((*Counter).explode),
		aggregate.Handles((*Counter).nothing),
		aggregate.Handles((*Counter).checkCount),
		aggregate.Handles((*Counter).stamp),
		aggregate.Handles((*Counter).echo),
		aggregate.Handles((*Counter).incrementAt),
		aggregate.Applies((*Counter).incremented),
		aggregate.Applies((*Counter).stamped),
		aggregate.Applies((*Counter).echoed),
		aggregate.Applies((*Counter).bomb),
	}
}

func (c *Counter) increment(_ context.Context, cmd Increment) ([]any, error) {
	by := cmd.By
	if by == 0 {
		by = 1
	}
	return []any{Incremented{By: by}}, nil
}

func (c *Counter) incrementTwice(context.Context, IncrementTwice) ([]any, error) {
	return []any{Incremented{By: 1}, &Incremented{By: 1}}, nil
}

func (c *Counter) reject(context.Context, Reject) ([]any, error) { return nil, ErrRejected }

func (c *Counter) explode(context.Context, Explode) ([]any, error) { panic("counter: explode") }

func (c *Counter) nothing(context.Context, Nothing) ([]any, error) { return nil, nil }

func (c *Counter) checkCount(_ context.Context, cmd CheckCount) ([]any, error) {
	if c.Count != cmd.Want {
		return nil, fmt.Errorf("%w: %d, want %d", ErrWrongCount, c.Count, cmd.Want)
	}
	return nil, nil
}

func (c *Counter) stamp(_ context.Context, cmd Stamp) ([]any, error) {
	events := []any{Stamped{Token: uuid.NewString()}}
	if cmd.Decided != nil {
		cmd.Decided()
	}
	return events, nil
}

func (c *Counter) echo(context.Context, Echo) ([]any, error) {
	return []any{Echoed{Token: c.Token}}, nil
}

func (c *Counter) incrementAt(_ context.Context, cmd IncrementAt) ([]any, error) {
	if c.Count != cmd.At {
		return nil, fmt.Errorf("%w: %d, want %d", ErrWrongCount, c.Count, cmd.At)
	}
	return []any{Incremented{By: 1}}, nil
}

func (c *Counter) incremented(e Incremented) {
	c.Count += e.By
	c.Applied++
}

func (c *Counter) stamped(e Stamped) {
	c.Token = e.Token
	c.Applied++
}

func (c *Counter) echoed(Echoed) { c.Applied++ }

func (c *Counter) bomb(Bomb) { panic("counter: bomb") }

func newRegistry(t testing.TB) *codec.Registry {
	reg := codec.NewRegistry(codec.Options{})
	check.NoError(t, codec.Register[Incremented](reg, "counter.incremented", 1))
	check.NoError(t, codec.Register[Poisoned](reg, "counter.poisoned", 1))
	check.NoError(t, codec.Register[Bomb](reg, "counter.bomb", 1))
	check.NoError(t, codec.Register[Stamped](reg, "counter.stamped", 1))
	check.NoError(t, codec.Register[Echoed](reg, "counter.echoed", 1))
	check.NoError(t, codec.Register[Counter](reg, "counter.state", 2))
	// Commands the codec knows are named in their events, so that the bus
	// refuses their IDs reused by a command of another type.
	check.NoError(t, codec.Register[Increment](reg, "counter.increment", 1))
	check.NoError(t, codec.Register[IncrementTwice](reg, "counter.increment-twice", 1))
	check.NoError(t, codec.Register[Reject](reg, "counter.reject", 1))
	check.NoError(t, reg.Validate())
	return reg
}
