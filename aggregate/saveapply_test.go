package aggregate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore/memory"
)

// Purse keeps what its events carry as they come, so that a state built
// from a value that differs from the stored event's decoding shows.
type Purse struct {
	Total  int
	Labels []string
	Memo   string
	At     time.Time
}

type (
	// Paid is exact: ints and strings only (the codec applies it as given).
	Paid struct {
		Amount int    `json:"amount"`
		Memo   string `json:"memo"`
	}
	// Tagged holds a slice: decoded, it shares nothing with the caller's.
	Tagged struct {
		Labels []string `json:"labels"`
	}
	// Clocked holds a time, whose decoding loses the monotonic clock.
	Clocked struct {
		At time.Time `json:"at"`
	}
)

func (l *Purse) Handle(_ context.Context, cmd any) ([]any, error) {
	return cmd.([]any), nil
}

func (l *Purse) Apply(event any) error {
	switch e := event.(type) {
	case Paid:
		l.Total += e.Amount
		l.Memo = e.Memo
	case Tagged:
		l.Labels = e.Labels
	case Clocked:
		l.At = e.At
	default:
		return errors.New("unknown event")
	}
	return nil
}

func purseRepo(t *testing.T) *aggregate.Repository[Purse, *Purse] {
	t.Helper()
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[Paid](reg, "purse.posted", 1))
	require.NoError(t, codec.Register[Tagged](reg, "purse.labelled", 1))
	require.NoError(t, codec.Register[Clocked](reg, "purse.stamped", 1))
	typ, err := aggregate.NewType[Purse]("purse", aggregate.Options[Purse]{})
	require.NoError(t, err)
	repo, err := aggregate.NewRepository(store, reg, typ, aggregate.RepositoryOptions{})
	require.NoError(t, err)
	return repo
}

// TestSaveBuildsTheStateAReplayBuilds: whether the codec lets Save apply
// an event as given (Paid) or it decodes what it stored (a slice, a
// time, a string that is not valid UTF-8, a pointer), the state after
// Save is the one a replay of the stream builds, and shares no memory
// with the events the caller passed.
func TestSaveBuildsTheStateAReplayBuilds(t *testing.T) {
	ctx := context.Background()
	repo := purseRepo(t)
	inst, err := repo.Load(ctx, "1")
	require.NoError(t, err)
	labels := []string{"a", "b"}
	events := []any{
		Paid{Amount: 5, Memo: "rent"},
		&Paid{Amount: 2, Memo: "bad \xff byte"},
		Tagged{Labels: labels},
		Clocked{At: time.Now()},
	}
	out, err := repo.Save(ctx, inst, events, aggregate.SaveOptions{})
	require.NoError(t, err)
	labels[0] = "changed by the caller after Save"

	replayed, err := repo.Load(ctx, "1")
	require.NoError(t, err)
	assert.Equal(t, replayed.State, inst.State)
	assert.True(t, replayed.State.At == inst.State.At, "the same time.Time, monotonic clock and location included")
	assert.Equal(t, "bad \ufffd byte", inst.State.Memo, "the string as stored")
	assert.Equal(t, []string{"a", "b"}, inst.State.Labels, "the state does not share the caller's slice")
	assert.Equal(t, []any{Paid{Amount: 5, Memo: "rent"}, Paid{Amount: 2, Memo: "bad \ufffd byte"}, Tagged{Labels: []string{"a", "b"}}, Clocked{At: replayed.State.At}}, out.Events,
		"the outcome holds the values a replay applies: a T for a *T, the stored string, the decoded time")
}
