package command_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/testrig/pgtest"
)

// Review (S3) of the command index without the command bus's appends: the
// bus end to end on SQLite and PostgreSQL, with commands of many events
// (PostgreSQL once read a bus command 17 events a page), redelivered to a cold
// bus below a snapshot, so that the bus must ask CommandResult; and
// recorded rejections re-sent.

type s3Tally struct {
	ID    string `json:"id"`
	Count int    `json:"count"`
}

type (
	// s3AddMany adds 1, N times, in N events, when the count is At (any
	// count when At is negative); refused with errS3WrongCount otherwise.
	s3AddMany struct {
		ID string
		N  int
		At int
	}
	s3Added struct {
		By int `json:"by"`
	}
)

func (c s3AddMany) AggregateID() string { return c.ID }

var errS3WrongCount = errors.New("tally: wrong count")

func (s *s3Tally) addMany(_ context.Context, c s3AddMany) ([]any, error) {
	if c.At >= 0 && s.Count != c.At {
		return nil, fmt.Errorf("%w: %d, want %d", errS3WrongCount, s.Count, c.At)
	}
	out := make([]any, c.N)
	for i := range out {
		out[i] = s3Added{By: 1}
	}
	return out, nil
}

func (s *s3Tally) added(e s3Added) { s.Count += e.By }

type s3Store interface {
	eventstore.Store
	storekit.SnapshotStore
}

func s3Bus(t *testing.T, store s3Store, opts command.Options) *command.Bus {
	t.Helper()
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[s3Added](reg, "tally.added", 1))
	require.NoError(t, codec.Register[s3Tally](reg, "tally.state", 1))
	typ, err := aggregate.NewType[s3Tally]("tally", aggregate.Options[s3Tally]{SnapshotEvery: 5},
		aggregate.Handles((*s3Tally).addMany), aggregate.Applies((*s3Tally).added))
	require.NoError(t, err)
	opts.Snapshots = store
	b := command.New(store, reg, opts)
	require.NoError(t, command.Route[s3AddMany](b, typ))
	return b
}

func s3Stores(t *testing.T) map[string]func(t *testing.T) s3Store {
	return map[string]func(t *testing.T) s3Store{
		"sqlite": func(t *testing.T) s3Store {
			s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "events.db"), sqlite.Options{})
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		"postgres": func(t *testing.T) s3Store {
			server := pgtest.ForTest(t, pgtest.Options{})
			s, err := postgres.Open(context.Background(), server.URL, postgres.Options{Schema: server.NewSchema("s3")})
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
	}
}

func TestReviewS3BusRedeliversBigCommandsBelowSnapshot(t *testing.T) {
	for name, open := range s3Stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			store := open(t)
			warm := s3Bus(t, store, command.Options{})
			sizes := []int{1, 16, 17, 18, 34, 40}
			type sent struct {
				msg   command.Message
				first command.Result
			}
			var sents []sent
			count := 0
			for i, n := range sizes {
				// Every other command succeeds only at the count it had,
				// so that deciding it again later refuses it.
				at := -1
				if i%2 == 1 {
					at = count
				}
				msg := command.Message{ID: fmt.Sprint("big-", n), Command: s3AddMany{ID: "t1", N: n, At: at}}
				res, err := warm.Dispatch(ctx, msg)
				require.NoError(t, err)
				require.Len(t, res.Events, n)
				count += n
				sents = append(sents, sent{msg, res})
			}
			// Moves the aggregate on, past several snapshots.
			for i := range 12 {
				_, err := warm.Dispatch(ctx, command.Message{ID: fmt.Sprint("small-", i), Command: s3AddMany{ID: "t1", N: 1, At: -1}})
				require.NoError(t, err)
				count++
			}
			snap, ok, err := store.LoadSnapshot(ctx, "tally-t1")
			require.NoError(t, err)
			require.True(t, ok)
			require.Greater(t, snap.Version, sents[len(sents)-1].first.Version)

			for _, b := range []*command.Bus{s3Bus(t, store, command.Options{NoCache: true}), warm} {
				for _, s := range sents {
					again, err := b.Dispatch(ctx, s.msg)
					require.NoError(t, err, s.msg.ID)
					assert.True(t, again.Duplicate, s.msg.ID)
					assert.Equal(t, s.first.Version, again.Version, s.msg.ID)
					assert.Equal(t, s.first.Position, again.Position, s.msg.ID)
					assert.Equal(t, s.first.Events, again.Events, s.msg.ID)
				}
			}
			var n int
			for _, err := range store.ReadStream(ctx, "tally-t1", eventstore.Forward(0)) {
				require.NoError(t, err)
				n++
			}
			assert.Equal(t, count, n, "no redelivery appended anything")
		})
	}
}

func TestReviewS3BusRecordedRejectionResent(t *testing.T) {
	for name, open := range s3Stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			store := open(t)
			warm := s3Bus(t, store, command.Options{})
			// Refused (the count is 0, not 3) and recorded.
			msg := command.Message{ID: "at-3", Command: s3AddMany{ID: "t2", N: 20, At: 3}, RecordRejection: true}
			_, err := warm.Dispatch(ctx, msg)
			require.ErrorIs(t, err, errS3WrongCount)
			// The count reaches 3, then moves on past snapshots: decided
			// now, the command would have succeeded at 3.
			for i := range 3 {
				_, err := warm.Dispatch(ctx, command.Message{ID: fmt.Sprint("inc-", i), Command: s3AddMany{ID: "t2", N: 1, At: -1}})
				require.NoError(t, err)
			}
			cold := s3Bus(t, store, command.Options{NoCache: true})
			m := msg
			m.Command = s3AddMany{ID: "t2", N: 20, At: 3}
			again, err := cold.Dispatch(ctx, m)
			var rr *command.RecordedRejectionError
			require.ErrorAs(t, err, &rr, "a re-send gets the recorded rejection, not a new decision")
			assert.True(t, again.Duplicate)
			assert.Equal(t, uint64(0), again.Version)
			for i := range 12 {
				_, err := warm.Dispatch(ctx, command.Message{ID: fmt.Sprint("more-", i), Command: s3AddMany{ID: "t2", N: 1, At: -1}})
				require.NoError(t, err)
			}
			m.Command = s3AddMany{ID: "t2", N: 20, At: -1}
			for _, b := range []*command.Bus{s3Bus(t, store, command.Options{NoCache: true}), warm} {
				again, err = b.Dispatch(ctx, m)
				require.ErrorAs(t, err, &rr, "below the snapshot, a decision that would now succeed")
				assert.True(t, again.Duplicate)
				assert.Equal(t, uint64(0), again.Version)
			}
			var n int
			for _, err := range store.ReadStream(ctx, "tally-t2", eventstore.Forward(0)) {
				require.NoError(t, err)
				n++
			}
			assert.Equal(t, 1+3+12, n, "the rejection, then the increments; nothing from the re-sends")
		})
	}
}
