package postgres_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
)

// The peers harness's account, so that the ceiling benchmark can run the
// whole framework path beside the store's and the engine's.
type ceilingAccount struct {
	ID      string `json:"id"`
	Balance int    `json:"balance"`
}

type ceilingDeposit struct {
	AccountID string
	Amount    int
}

func (c ceilingDeposit) AggregateID() string { return c.AccountID }

type ceilingDeposited struct {
	Amount int `json:"amount"`
}

func (a *ceilingAccount) Handle(_ context.Context, cmd any) ([]any, error) {
	if c, ok := cmd.(ceilingDeposit); ok {
		return []any{ceilingDeposited{Amount: c.Amount}}, nil
	}
	return nil, fmt.Errorf("account: unknown command %T", cmd)
}

func (a *ceilingAccount) Apply(event any) error {
	e, ok := event.(ceilingDeposited)
	if !ok {
		return fmt.Errorf("%w: %T", aggregate.ErrUnknownEvent, event)
	}
	a.Balance += e.Amount
	return nil
}

// ceilingFramework is the peers harness's Cairn path on a store: save
// through the repository (Load, a miss, then Handle and Save), a command
// through the bus (default options).
type ceilingFramework struct {
	repo *aggregate.Repository[ceilingAccount, *ceilingAccount]
	bus  *command.Bus
	ids  int
}

func newCeilingFramework(b *testing.B, s eventstore.Store) *ceilingFramework {
	reg := codec.NewRegistry(codec.Options{})
	if err := codec.Register[ceilingDeposited](reg, "account.deposited", 1); err != nil {
		b.Fatal(err)
	}
	typ, err := aggregate.NewType[ceilingAccount]("ceiling", aggregate.Options[ceilingAccount]{
		New: func(id string) *ceilingAccount { return &ceilingAccount{ID: id} },
	})
	if err != nil {
		b.Fatal(err)
	}
	f := &ceilingFramework{bus: command.New(s, reg, command.Options{})}
	if f.repo, err = aggregate.NewRepository(s, reg, typ, aggregate.RepositoryOptions{}); err != nil {
		b.Fatal(err)
	}
	if err := command.Route[ceilingDeposit](f.bus, typ); err != nil {
		b.Fatal(err)
	}
	return f
}

// save starts aggregate id with one event, as the harness's save does.
func (f *ceilingFramework) save(ctx context.Context, id string) error {
	inst, err := f.repo.Load(ctx, id)
	if err != nil {
		return err
	}
	evs, err := inst.Handle(ctx, ceilingDeposit{AccountID: id, Amount: 1})
	if err != nil {
		return err
	}
	_, err = f.repo.Save(ctx, inst, evs, aggregate.SaveOptions{})
	return err
}

// command sends aggregate id a deposit through the bus.
func (f *ceilingFramework) command(ctx context.Context, id string) error {
	f.ids++
	_, err := f.bus.Dispatch(ctx, command.Message{ID: strconv.Itoa(f.ids), Command: ceilingDeposit{AccountID: id, Amount: 1}})
	return err
}
