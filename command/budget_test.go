package command_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/command/commandtest"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/internal/testrig/race"
)

// allocBudgets are the allocations the hot paths may make, per store: a
// save of a new aggregate's first event (Repository.New, Handle, Save), a
// load of an aggregate of 100 events, a load of one that does not exist (a
// miss, as before creating one with Load), and a bus command on a cached
// aggregate. They are what the paths make now (docs/benchmarks.md, "Compared
// with other Go frameworks"): a change that allocates more fails here, and
// one that allocates less should lower them.
var allocBudgets = map[string]struct{ save, load100, miss, command float64 }{
	"memory": {save: 8, load100: 104, miss: 3, command: 7},
	"sqlite": {save: 14, load100: 105, miss: 4, command: 13},
}

// TestAllocationBudgets holds the save, load and command paths to their
// allocation budgets on the memory and SQLite stores. The race detector
// changes what allocates (sync.Pool drops its items at random), so it is
// skipped there; `make test` runs it without.
func TestAllocationBudgets(t *testing.T) {
	if race.Enabled {
		t.Skip("allocation counts differ under the race detector")
	}
	for name, open := range map[string]func(t *testing.T) eventstore.Store{
		"memory": func(*testing.T) eventstore.Store { return memory.New() },
		"sqlite": func(t *testing.T) eventstore.Store {
			s, err := sqlite.Open(context.Background(), t.TempDir()+"/budget.db", sqlite.Options{Synchronous: sqlite.SyncNormal})
			require.NoError(t, err)
			return s
		},
	} {
		t.Run(name, func(t *testing.T) {
			store := open(t)
			t.Cleanup(func() { _ = store.Close() })
			budget := allocBudgets[name]
			ctx := context.Background()
			reg, err := crashRegistry()
			require.NoError(t, err)
			typ, err := aggregate.NewType[commandtest.Counter]("counter", aggregate.Options[commandtest.Counter]{}, commandtest.CounterBindings()...)
			require.NoError(t, err)
			repo, err := aggregate.NewRepository(store, reg, typ, aggregate.RepositoryOptions{})
			require.NoError(t, err)

			n := 0
			save := testing.AllocsPerRun(200, func() {
				n++
				inst, err := repo.New(strconv.Itoa(n))
				require.NoError(t, err)
				events, err := inst.Handle(ctx, commandtest.Increment{ID: inst.ID})
				require.NoError(t, err)
				_, err = repo.Save(ctx, inst, events, aggregate.SaveOptions{})
				require.NoError(t, err)
			})

			inst, err := repo.New("loaded")
			require.NoError(t, err)
			hundred := make([]any, 100)
			for i := range hundred {
				hundred[i] = commandtest.Incremented{By: 1}
			}
			_, err = repo.Save(ctx, inst, hundred, aggregate.SaveOptions{})
			require.NoError(t, err)
			load := testing.AllocsPerRun(50, func() {
				inst, err := repo.Load(ctx, "loaded")
				require.NoError(t, err)
				require.Equal(t, 100, inst.State.Count)
			})
			missing := make([]string, 210) // AllocsPerRun runs once more than asked
			for i := range missing {
				missing[i] = "missing" + strconv.Itoa(i)
			}
			m := 0
			miss := testing.AllocsPerRun(200, func() {
				m++
				inst, err := repo.Load(ctx, missing[m])
				require.NoError(t, err)
				require.False(t, inst.Exists)
			})

			bus := command.New(store, reg, command.Options{})
			require.NoError(t, command.Route[commandtest.Increment](bus, typ))
			ids := make([]string, 300)
			for i := range ids {
				ids[i] = "c" + strconv.Itoa(i)
			}
			_, err = bus.Dispatch(ctx, command.Message{ID: "warm", Command: commandtest.Increment{ID: "hot"}})
			require.NoError(t, err)
			c := 0
			cmd := testing.AllocsPerRun(200, func() {
				c++
				_, err := bus.Dispatch(ctx, command.Message{ID: ids[c], Command: commandtest.Increment{ID: "hot"}})
				require.NoError(t, err)
			})

			t.Logf("%s allocations: save %.0f, load of 100 events %.0f, load of a missing aggregate %.0f, bus command %.0f", name, save, load, miss, cmd)
			assert.LessOrEqual(t, save, budget.save, "save of a new aggregate's first event")
			assert.LessOrEqual(t, load, budget.load100, "load of 100 events")
			assert.LessOrEqual(t, miss, budget.miss, "load of a missing aggregate")
			assert.LessOrEqual(t, cmd, budget.command, "bus command on a cached aggregate")
		})
	}
}
