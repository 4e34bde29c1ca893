package command_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore/memory"
)

// Account is an aggregate: a plain struct, with a method per command it
// decides and per event it applies.
type Account struct {
	ID      string `json:"id"`
	Balance int    `json:"balance"`
}

// Commands name the aggregate they are for.
type (
	Deposit struct {
		AccountID string
		Amount    int
	}
	Withdraw struct {
		AccountID string
		Amount    int
	}
)

func (c Deposit) AggregateID() string  { return c.AccountID }
func (c Withdraw) AggregateID() string { return c.AccountID }

// Events are what happened; they are registered with the codec under
// stable names.
type (
	Deposited struct {
		Amount int `json:"amount"`
	}
	Withdrawn struct {
		Amount int `json:"amount"`
	}
)

var ErrInsufficientFunds = errors.New("insufficient funds")

// Deposit decides a Deposit; it never changes the account.
func (a *Account) Deposit(_ context.Context, c Deposit) ([]any, error) {
	return []any{Deposited{Amount: c.Amount}}, nil
}

// Withdraw decides a Withdraw.
func (a *Account) Withdraw(_ context.Context, c Withdraw) ([]any, error) {
	if c.Amount > a.Balance {
		return nil, ErrInsufficientFunds
	}
	return []any{Withdrawn{Amount: c.Amount}}, nil
}

// Deposited and Withdrawn evolve the account by one stored event.
func (a *Account) Deposited(e Deposited) { a.Balance += e.Amount }
func (a *Account) Withdrawn(e Withdrawn) { a.Balance -= e.Amount }

// accountBindings bind each command and event type of an account to its
// method.
var accountBindings = []aggregate.Binding[Account]{
	aggregate.Handles((*Account).Deposit),
	aggregate.Handles((*Account).Withdraw),
	aggregate.Applies((*Account).Deposited),
	aggregate.Applies((*Account).Withdrawn),
}

func Example() {
	ctx := context.Background()
	store := memory.New()
	defer store.Close()

	reg := codec.NewRegistry(codec.Options{})
	_ = codec.Register[Deposited](reg, "account.deposited", 1)
	_ = codec.Register[Withdrawn](reg, "account.withdrawn", 1)
	_ = codec.Register[Account](reg, "account.state", 1) // for snapshots

	accounts, _ := aggregate.NewType[Account]("account", aggregate.Options[Account]{SnapshotEvery: 100},
		aggregate.Handles((*Account).Deposit),
		aggregate.Handles((*Account).Withdraw),
		aggregate.Applies((*Account).Deposited),
		aggregate.Applies((*Account).Withdrawn),
	)
	bus := command.New(store, reg, command.Options{}) // the store keeps the snapshots too
	if err := command.Route[Deposit](bus, accounts); err != nil {
		panic(err)
	}
	if err := command.Route[Withdraw](bus, accounts); err != nil {
		panic(err)
	}

	// The ID of the queue message the command came from.
	msg := command.Message{ID: "msg-1", Command: Deposit{AccountID: "42", Amount: 100}}
	res, err := bus.Dispatch(ctx, msg)
	fmt.Println(res.Stream, res.Version, res.Events, res.Duplicate, err)

	// The queue redelivers it: the earlier result, nothing appended.
	res, err = bus.Dispatch(ctx, msg)
	fmt.Println(res.Stream, res.Version, res.Events, res.Duplicate, err)

	// The aggregate's own rejection comes back unchanged.
	_, err = bus.Dispatch(ctx, command.Message{ID: "msg-2", Command: Withdraw{AccountID: "42", Amount: 500}})
	fmt.Println(errors.Is(err, ErrInsufficientFunds))

	// Output:
	// account-42 0 [{100}] false <nil>
	// account-42 0 [{100}] true <nil>
	// true
}
