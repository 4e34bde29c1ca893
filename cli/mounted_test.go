package cli_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/cli"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/testrig/clitest"
	"github.com/cairn-es/cairn/projection"
)

// tallyAdded is the event the mounted projection counts.
type tallyAdded struct {
	N int `json:"n"`
}

// The dead letters of the tally projection.
const (
	tallyRetryDL = "01JC0000000000000000000010"
	tallySkipDL  = "01JC0000000000000000000011"
)

// tallyService is a service with one projection, "tally", whose read model
// is a count of tally.added events, kept in count.
type tallyService struct {
	reg   *codec.Registry
	count atomic.Int64
}

func newTallyService(t *testing.T) *tallyService {
	s := &tallyService{reg: codec.NewRegistry(codec.Options{})}
	require.NoError(t, codec.Register[tallyAdded](s.reg, "tally.added", 1))
	return s
}

func (s *tallyService) consumer(store eventstore.Store) (*projection.Consumer, error) {
	h := projection.Typed(func(context.Context, tallyAdded, codec.Decoded) error {
		s.count.Add(1)
		return nil
	})
	return projection.New("tally", store, s.reg, store.(storekit.CheckpointStore), h, projection.Options{
		Filter: eventstore.Filter{Types: []string{"tally.added"}}, NoStatsLog: true,
	})
}

// options mounts the service in the command line, as a service's binary
// does.
func (s *tallyService) options() cli.Options {
	return cli.Options{Service: func(_ context.Context, store eventstore.Store) (*cli.Service, error) {
		c, err := s.consumer(store)
		if err != nil {
			return nil, err
		}
		reset := func(context.Context) error { s.count.Store(0); return nil }
		return &cli.Service{Registry: s.reg, Projections: []cli.ProjectionConsumer{
			cli.Projection(c, cli.ProjectionOptions{Reset: reset}),
		}}, nil
	}}
}

// TestGoldenMounted runs the commands that need the service's code in a
// binary that mounts a projection: rebuild really rebuilds the read model,
// retry really handles the dead letter.
func TestGoldenMounted(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			url, store := b.create(t)
			buildFixture(t, store)
			svc := newTallyService(t)
			for i := range 3 {
				e, err := svc.reg.Encode(tallyAdded{N: i})
				require.NoError(t, err)
				_, err = store.Append(ctx, "tally-1", eventstore.Any, e)
				require.NoError(t, err)
			}
			c, err := svc.consumer(store)
			require.NoError(t, err)
			require.NoError(t, c.CatchUp(ctx))
			require.Equal(t, int64(3), svc.count.Load())
			var tallies []eventstore.Event
			for e, err := range store.ReadStream(ctx, "tally-1", eventstore.ReadOptions{}) {
				require.NoError(t, err)
				tallies = append(tallies, e)
			}
			// Two events failed once, before: their dead letters. (The
			// rebuild, which replays them, would resolve them: the retry
			// and skip come first.)
			for i, id := range []string{tallyRetryDL, tallySkipDL} {
				_, err := store.(storekit.DeadLetterStore).ParkDeadLetter(ctx, eventstore.DeadLetter{
					ID: id, Consumer: "tally", Event: tallies[i], Error: "tally: database busy", Attempts: 3,
					FirstFailure: clitest.FixtureFailure, LastFailure: clitest.FixtureFailure,
				})
				require.NoError(t, err)
			}
			require.NoError(t, store.Close())
			svc.count.Store(99) // a read model out of step, which a rebuild puts right

			do := func(name string, args ...string) result {
				t.Helper()
				r := run(t, svc.options(), "", append([]string{"--store", url}, args...)...)
				consumerGolden(t, name, r)
				return r
			}
			do("mounted-projections-ls", "projections", "ls")
			do("mounted-projections-status", "projections", "status", "tally")
			do("mounted-doctor", "doctor")
			do("mounted-retry-saga", "deadletters", "retry", sagaDL, "--consumer", "saga:sale", "--yes")
			do("mounted-retry-missing", "deadletters", "retry", missing, "--consumer", "tally", "--yes")
			do("mounted-retry-not-confirmed", "deadletters", "retry", tallyRetryDL, "--consumer", "tally")
			r := do("mounted-retry", "deadletters", "retry", tallyRetryDL, "--consumer", "tally", "--yes")
			require.Equal(t, cli.ExitOK, r.code, r.stderr)
			assert.Equal(t, int64(100), svc.count.Load(), "the retried event was handled once more")
			r = do("mounted-skip", "deadletters", "skip", tallySkipDL, "--consumer", "tally", "--yes")
			require.Equal(t, cli.ExitOK, r.code, r.stderr)
			assert.Equal(t, int64(100), svc.count.Load(), "a skipped event is not handled")

			do("mounted-rebuild-unknown", "projections", "rebuild", "nobody", "--yes")
			do("mounted-rebuild-not-confirmed", "projections", "rebuild", "tally")
			assert.Equal(t, int64(100), svc.count.Load(), "not confirmed: nothing rebuilt")
			r = do("mounted-rebuild", "projections", "rebuild", "tally", "--yes")
			require.Equal(t, cli.ExitOK, r.code, r.stderr)
			assert.Equal(t, int64(3), svc.count.Load(), "reset to 0, then the 3 events applied")

			s := reopen(t, url)
			n, err := s.CountDeadLetters(ctx, "tally")
			require.NoError(t, err)
			assert.Zero(t, n, "retried and skipped")
		})
	}
}

// A transactional projection mounted with TxProjection is rebuilt through
// projection.RebuildTx: its reset runs in the transaction that moves the
// checkpoint back, after the service's other reset, if any.
func TestTxProjectionRebuild(t *testing.T) {
	ctx := context.Background()
	url, store := backends()[0].create(t)
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[tallyAdded](reg, "tally.added", 1))
	for i := range 2 {
		e, err := reg.Encode(tallyAdded{N: i})
		require.NoError(t, err)
		_, err = store.Append(ctx, "tally-1", eventstore.Any, e)
		require.NoError(t, err)
	}
	require.NoError(t, store.Close())

	var count atomic.Int64
	var resets []string
	opts := cli.Options{Service: func(_ context.Context, store eventstore.Store) (*cli.Service, error) {
		s := store.(*sqlite.Store)
		h := projection.TypedTx(func(context.Context, *sql.Tx, tallyAdded, codec.Decoded) error {
			count.Add(1)
			return nil
		})
		c, err := projection.NewTx[*sql.Tx]("tally", s, reg, s, h, projection.Options{
			Filter: eventstore.Filter{Types: []string{"tally.added"}}, NoStatsLog: true,
		})
		if err != nil {
			return nil, err
		}
		resetTx := func(_ context.Context, tx *sql.Tx) error {
			if tx == nil {
				return errors.New("no transaction")
			}
			resets = append(resets, "in the transaction")
			count.Store(0)
			return nil
		}
		first := func(context.Context) error { resets = append(resets, "first"); return nil }
		return &cli.Service{Projections: []cli.ProjectionConsumer{
			cli.TxProjection(c, resetTx, cli.ProjectionOptions{Reset: first}),
		}}, nil
	}}
	count.Store(7)
	r := run(t, opts, "", "--store", url, "projections", "rebuild", "tally", "--yes", "--json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	assert.Equal(t, []string{"first", "in the transaction"}, resets)
	assert.Equal(t, int64(2), count.Load())
	var rebuilt struct {
		Consumer string `json:"consumer"`
		Replayed int    `json:"replayed"`
		Reset    bool   `json:"reset"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rebuilt))
	assert.Equal(t, "tally", rebuilt.Consumer)
	assert.Equal(t, 2, rebuilt.Replayed)
	assert.True(t, rebuilt.Reset)
}
