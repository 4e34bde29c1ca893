package command_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
)

var errNegative = errors.New("amount must be positive")

// Validate makes Deposit a command.Validator.
func (c Deposit) Validate() error {
	if c.Amount <= 0 {
		return errNegative
	}
	return nil
}

func accountBus(t *testing.T, mw ...command.Middleware) (*command.Bus, *memory.Store) {
	t.Helper()
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[Deposited](reg, "account.deposited", 1))
	require.NoError(t, codec.Register[Withdrawn](reg, "account.withdrawn", 1))
	typ, err := aggregate.NewType[Account]("account", aggregate.Options[Account]{}, accountBindings...)
	require.NoError(t, err)
	b := command.New(store, reg, command.Options{Middleware: mw})
	require.NoError(t, command.Route[Deposit](b, typ))
	require.NoError(t, command.Route[Withdraw](b, typ))
	return b, store
}

func TestMiddlewareOrder(t *testing.T) {
	var order []string
	tag := func(name string) command.Middleware {
		return func(next command.Handler) command.Handler {
			return command.HandlerFunc(func(ctx context.Context, msg *command.Message) (command.Result, error) {
				order = append(order, name+" in")
				res, err := next.Dispatch(ctx, msg)
				order = append(order, name+" out")
				return res, err
			})
		}
	}
	b, _ := accountBus(t, tag("outer"), tag("inner"))
	_, err := b.Dispatch(context.Background(), command.Message{Command: Deposit{AccountID: "1", Amount: 1}})
	require.NoError(t, err)
	assert.Equal(t, []string{"outer in", "inner in", "inner out", "outer out"}, order)
}

func TestValidating(t *testing.T) {
	b, store := accountBus(t, command.Validating())
	_, err := b.Dispatch(context.Background(), command.Message{ID: "m1", Command: Deposit{AccountID: "1", Amount: -5}})
	require.ErrorIs(t, err, errNegative)
	var ve *command.ValidationError
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, "m1", ve.CommandID)
	assert.Contains(t, err.Error(), "command_test.Deposit")
	for range store.ReadStream(context.Background(), "account-1", eventstore.Forward(0)) {
		t.Fatal("an invalid command must write nothing")
	}
	// Commands without a Validate method pass.
	_, err = b.Dispatch(context.Background(), command.Message{Command: Withdraw{AccountID: "1", Amount: 0}})
	require.NoError(t, err)
}

func TestLoggingAndObserving(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var mu sync.Mutex
	var seen []command.Observation
	b, _ := accountBus(t, command.Logging(logger), command.Observing(func(_ context.Context, o command.Observation) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, o)
	}))
	ctx := context.Background()
	msg := command.Message{ID: "m1", Command: Deposit{AccountID: "1", Amount: 5}}
	_, err := b.Dispatch(ctx, msg)
	require.NoError(t, err)
	_, err = b.Dispatch(ctx, msg)
	require.NoError(t, err)
	_, err = b.Dispatch(ctx, command.Message{ID: "m2", Command: Withdraw{AccountID: "1", Amount: 50}})
	require.ErrorIs(t, err, ErrInsufficientFunds)

	require.Len(t, seen, 3)
	assert.False(t, seen[0].Result.Duplicate)
	assert.True(t, seen[1].Result.Duplicate)
	assert.ErrorIs(t, seen[2].Err, ErrInsufficientFunds)
	assert.Equal(t, "m2", seen[2].Message.ID)

	out := buf.String()
	assert.Contains(t, out, "level=DEBUG msg=\"command dispatched\" command_type=command_test.Deposit command_id=m1 stream=account-1 events=1")
	assert.Contains(t, out, "level=INFO msg=\"command dispatched\" command_type=command_test.Deposit command_id=m1")
	assert.Contains(t, out, "duplicate=true")
	assert.Contains(t, out, "level=WARN")
	assert.Contains(t, out, "error=\"insufficient funds\"")
}

func TestMiddlewareSeesGeneratedID(t *testing.T) {
	var id string
	b, _ := accountBus(t, func(next command.Handler) command.Handler {
		return command.HandlerFunc(func(ctx context.Context, msg *command.Message) (command.Result, error) {
			id = msg.ID
			return next.Dispatch(ctx, msg)
		})
	})
	res, err := b.Dispatch(context.Background(), command.Message{Command: Deposit{AccountID: "1", Amount: 1}})
	require.NoError(t, err)
	assert.NotEmpty(t, id)
	assert.Equal(t, id, res.CommandID)
}
