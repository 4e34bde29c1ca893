package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
)

// The same requests, arriving in the order sent by one sender and shuffled
// two ways by eight, end in the same states: every valid transition accepted
// once, every invalid one refused with its typed error.
func TestEveryArrivalOrderEndsTheSame(t *testing.T) {
	const machines, pieces = 4, 8
	for _, order := range []struct {
		seed    uint64
		senders int
	}{{0, 1}, {1, 8}, {2, 8}} {
		t.Run(fmt.Sprintf("seed %d", order.seed), func(t *testing.T) {
			cfg := config{machines: machines, pieces: pieces, servers: 3, senders: order.senders, seed: order.seed,
				logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			var out strings.Builder
			r, err := run(context.Background(), cfg, &out)
			require.NoError(t, err, out.String())
			t.Log("\n" + out.String())

			assert.Equal(t, machines*(1+pieces)+machines/2, r.accepted, "jobs, pieces and one stop per even machine")
			assert.Equal(t, map[error]int{
				ErrPieceAlreadyDone: machines, // the sensor that fired twice
				ErrNoSuchPiece:      machines,
				ErrWrongJob:         machines / 2,
				ErrAlreadyStopping:  machines / 2, // the second stop request
			}, r.rejected, "every rejection is a *TransitionError with its reason")
			assert.Empty(t, r.inconsistent, "a request sent twice got one outcome")
			assert.Positive(t, r.resent)
			assert.LessOrEqual(t, r.duplicates, r.resent)
			assert.Equal(t, map[string]string{
				"m01": "idle after J1 8/8",
				"m02": "in maintenance after J1 8/8",
				"m03": "idle after J1 8/8",
				"m04": "in maintenance after J1 8/8",
			}, r.states)
			if order.seed == 0 {
				assert.Zero(t, r.planned, "in the order sent, each stop comes after the job's last piece")
			}
		})
	}
}

// A machine refuses with a *TransitionError that names its state and matches
// the reason with errors.Is.
func TestARefusalNamesTheStateAndTheReason(t *testing.T) {
	machines, err := aggregate.NewType[Machine]("machine", aggregate.Options[Machine]{}, machineBindings...)
	require.NoError(t, err)
	m := &Machine{id: "m1"}
	require.NoError(t, machines.Apply(m, JobStarted{Job: "J1", Pieces: 2}))
	require.NoError(t, machines.Apply(m, PieceFinished{Piece: 1}))
	_, err = machines.Handle(context.Background(), m, PieceDone{Machine: "m1", Job: "J1", Piece: 1})
	var refused *TransitionError
	require.ErrorAs(t, err, &refused)
	assert.ErrorIs(t, err, ErrPieceAlreadyDone)
	assert.Equal(t, "running J1 1/2", refused.State)

	events, err := machines.Handle(context.Background(), m, StopForMaintenance{Machine: "m1", By: "panel"})
	require.NoError(t, err)
	assert.Equal(t, []any{MaintenanceRequested{By: "panel"}}, events, "a busy machine stops after its job")
	require.NoError(t, machines.Apply(m, events[0]))
	events, err = machines.Handle(context.Background(), m, PieceDone{Machine: "m1", Job: "J1", Piece: 2})
	require.NoError(t, err)
	assert.Equal(t, []any{PieceFinished{Piece: 2}, JobCompleted{Job: "J1"}, MaintenanceStarted{By: "panel"}}, events)
}
