package aggregatetest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/aggregate/aggregatetest"
	"github.com/cairn-es/cairn/codec"
)

type Account struct {
	ID      string
	Balance int
	Closed  bool
}

type (
	Deposit  struct{ Amount int }
	Withdraw struct{ Amount int }
	Close    struct{}
	Sneaky   struct{} // a Handle that mutates: a bug the fixture reports
	Unknown  struct{}
)

type (
	Deposited struct{ Amount int }
	Withdrawn struct{ Amount int }
	Closed    struct{}
	Ghost     struct{} // decided but not applied: a bug the fixture reports
)

var ErrInsufficient = errors.New("insufficient funds")

func (a *Account) Deposit(_ context.Context, c Deposit) ([]any, error) {
	return []any{&Deposited{Amount: c.Amount}}, nil
}

func (a *Account) Withdraw(_ context.Context, c Withdraw) ([]any, error) {
	if c.Amount > a.Balance {
		return nil, fmt.Errorf("withdraw %d from %d: %w", c.Amount, a.Balance, ErrInsufficient)
	}
	return []any{Withdrawn(c)}, nil
}

func (a *Account) Close(context.Context, Close) ([]any, error) {
	if a.Closed {
		return nil, nil
	}
	return []any{Closed{}, Ghost{}}, nil
}

func (a *Account) Sneaky(context.Context, Sneaky) ([]any, error) {
	a.Balance = -1
	return nil, nil
}

func (a *Account) Deposited(e Deposited) { a.Balance += e.Amount }
func (a *Account) Withdrawn(e Withdrawn) { a.Balance -= e.Amount }
func (a *Account) WasClosed(Closed)      { a.Closed = true }

// accountBindings are what an account decides and applies; Unknown and
// Ghost have none.
var accountBindings = []aggregate.Binding[Account]{
	aggregate.Handles((*Account).Deposit),
	aggregate.Handles((*Account).Withdraw),
	aggregate.Handles((*Account).Close),
	aggregate.Handles((*Account).Sneaky),
	aggregate.Applies((*Account).Deposited),
	aggregate.Applies((*Account).Withdrawn),
	aggregate.Applies((*Account).WasClosed),
}

func accountType(t testing.TB) *aggregate.Type[Account, *Account] {
	typ, err := aggregate.NewType[Account]("account", aggregate.Options[Account]{
		New: func(id string) *Account { return &Account{ID: id} },
	}, accountBindings...)
	require.NoError(t, err)
	return typ
}

func TestPassingSpecifications(t *testing.T) {
	typ := accountType(t)
	aggregatetest.For(t, typ).Given(Deposited{Amount: 10}).When(Deposit{Amount: 5}).Then(Deposited{Amount: 5})
	aggregatetest.For(t, typ).Given(Deposited{Amount: 10}).When(Withdraw{Amount: 11}).ThenError(ErrInsufficient)
	aggregatetest.For(t, typ).Given(Closed{}).When(Close{}).ThenNothing()

	o := aggregatetest.For(t, typ).WithID("acc-7").Given(Deposited{Amount: 10}, Withdrawn{Amount: 3}).When(Deposit{Amount: 1})
	o.Then(&Deposited{Amount: 1})
	assert.Equal(t, &Account{ID: "acc-7", Balance: 8}, o.State(), "the state after given and decided events")
}

// failures runs a specification against a recorder and returns what it
// reported.
func failures(spec func(t testing.TB)) string {
	r := &recorder{}
	spec(r)
	return strings.Join(r.errors, "\n")
}

type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func TestFailuresAreReadable(t *testing.T) {
	typ := accountType(t)
	cases := map[string]struct {
		spec func(t testing.TB)
		want []string
	}{
		"wrong events": {
			func(t testing.TB) { aggregatetest.For(t, typ).When(Deposit{Amount: 5}).Then(Deposited{Amount: 6}) },
			[]string{"wrong events", "Deposited{Amount:6}", "Deposited{Amount:5}", "Amount (got 5, want 6)"},
		},
		"error instead of events": {
			func(t testing.TB) { aggregatetest.For(t, typ).When(Withdraw{Amount: 1}).Then(Withdrawn{Amount: 1}) },
			[]string{"got error", "insufficient funds"},
		},
		"events instead of error": {
			func(t testing.TB) { aggregatetest.For(t, typ).When(Deposit{Amount: 1}).ThenError(ErrInsufficient) },
			[]string{"want error insufficient funds", "Deposited{Amount:1}"},
		},
		"another error": {
			func(t testing.TB) {
				aggregatetest.For(t, typ).When(Unknown{}).ThenError(ErrInsufficient)
			},
			[]string{"want error matching insufficient funds", "no handler for command type aggregatetest_test.Unknown"},
		},
		"events instead of nothing": {
			func(t testing.TB) { aggregatetest.For(t, typ).When(Deposit{Amount: 1}).ThenNothing() },
			[]string{"want no events", "Deposited{Amount:1}"},
		},
		"decided event not applicable": {
			func(t testing.TB) { aggregatetest.For(t, typ).When(Close{}).Then(Closed{}, Ghost{}) },
			[]string{"event 1", "Ghost", "cannot be applied", "no applier"},
		},
		"given event not applicable": {
			func(t testing.TB) { aggregatetest.For(t, typ).Given(Ghost{}).When(Close{}).ThenNothing() },
			[]string{"given event 0", "Ghost", "cannot be applied"},
		},
		"handle mutates": {
			func(t testing.TB) { aggregatetest.For(t, typ).When(Sneaky{}).ThenNothing() },
			[]string{"changed the aggregate", "Balance"},
		},
		"unregistered event with codec": {
			func(t testing.TB) {
				reg := codec.NewRegistry(codec.Options{})
				_ = codec.Register[Deposited](reg, "account.deposited", 1)
				aggregatetest.For(t, typ).WithCodec(reg).Given(Withdrawn{Amount: 1}).When(Deposit{Amount: 1}).Then(Deposited{Amount: 1})
			},
			[]string{"given events", "unregistered"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := failures(tc.spec)
			require.NotEmpty(t, got, "the specification must fail")
			for _, w := range tc.want {
				assert.Contains(t, got, w)
			}
		})
	}
}

func TestWithCodecRoundTrips(t *testing.T) {
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[Deposited](reg, "account.deposited", 1))
	require.NoError(t, codec.Register[Withdrawn](reg, "account.withdrawn", 1))
	aggregatetest.For(t, accountType(t)).WithCodec(reg).
		Given(Deposited{Amount: 4}).
		When(Withdraw{Amount: 4}).
		Then(Withdrawn{Amount: 4})
}

func ExampleFor() {
	t := &testing.T{} // in a test, the *testing.T it was given
	typ, _ := aggregate.NewType[Account]("account", aggregate.Options[Account]{},
		aggregate.Handles((*Account).Withdraw),
		aggregate.Applies((*Account).Deposited),
		aggregate.Applies((*Account).Withdrawn),
	)
	aggregatetest.For(t, typ).
		Given(Deposited{Amount: 10}).
		When(Withdraw{Amount: 4}).
		Then(Withdrawn{Amount: 4})
	fmt.Println("failed:", t.Failed())
	// Output: failed: false
}
