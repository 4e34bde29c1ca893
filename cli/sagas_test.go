package cli_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/cli"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/testrig/clitest"
)

// The sagas commands run on clitest's ledger saga (see clitest.Ledger),
// which the cairn binary's tests build on KurrentDB too.

// ledgerOptions mount l's saga, as a service's binary does.
func ledgerOptions(t *testing.T, l *clitest.Ledger) cli.Options {
	return cli.Options{Service: func(_ context.Context, store eventstore.Store) (*cli.Service, error) {
		return &cli.Service{Sagas: []cli.SagaRunner{cli.Saga(l.RunnerOn(t, store))}}, nil
	}}
}

// TestGoldenSagas runs every sagas command on the ledger, on every
// backend, in an order in which each acts on what the ones before left,
// and checks each action's effect through a runner.
func TestGoldenSagas(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			url, store := b.create(t)
			t.Cleanup(func() { _ = store.Close() })
			l := clitest.NewLedger(t, store)
			mounted := ledgerOptions(t, l)
			var deadLetter string
			for d, err := range l.Runner(t).DeadLetters(context.Background()) {
				require.NoError(t, err)
				deadLetter = d.ID
			}
			require.NotEmpty(t, deadLetter)

			step := func(name string, opts cli.Options, want int, args ...string) result {
				t.Helper()
				r := run(t, opts, "", append([]string{"--store", url}, args...)...)
				golden(t, name, clitest.Output(r.stdout, r.stderr, r.code))
				require.Equal(t, want, r.code, "%s: %s", name, r.stderr)
				return r
			}
			// The bare binary's cases first (the cairn binary runs them on
			// KurrentDB too): they change nothing, and the mounted steps
			// up to the first action change nothing either. Only the
			// service's binary sees the parked instances and gaps.
			for _, tc := range clitest.SagasBareCases {
				r := run(t, cli.Options{}, "", append([]string{"--store", url}, tc.Args...)...)
				golden(t, tc.Name, clitest.Output(r.stdout, r.stderr, r.code))
			}
			step("sagas-ls", mounted, cli.ExitOK, "sagas", "ls")
			step("sagas-ls-type", mounted, cli.ExitOK, "sagas", "ls", "ledger")
			step("sagas-ls-unknown", mounted, cli.ExitUsage, "sagas", "ls", "nope")
			step("sagas-explain-parked", mounted, cli.ExitOK, "sagas", "explain", "ledger", "a")
			step("sagas-explain-gap", mounted, cli.ExitOK, "sagas", "explain", "ledger", "b")
			step("sagas-explain-no-instance", mounted, cli.ExitFailed, "sagas", "explain", "ledger", "zz")
			step("sagas-parked", mounted, cli.ExitOK, "sagas", "parked", "ledger")
			step("sagas-gaps", mounted, cli.ExitOK, "sagas", "gaps", "ledger")
			step("sagas-unknown-type", mounted, cli.ExitUsage, "sagas", "parked", "nope")
			step("sagas-doctor", mounted, cli.ExitAttention, "doctor")
			r := run(t, mounted, "", "--store", url, "doctor", "--json")
			var report struct {
				Healthy  bool   `json:"healthy"`
				Store    string `json:"store"`
				Findings []struct {
					What  string `json:"what"`
					Where string `json:"where"`
				} `json:"findings"`
			}
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &report), r.stdout)
			assert.False(t, report.Healthy)
			assert.Equal(t, b.name, report.Store, "doctor names the store (the goldens hide it)")
			var wheres []string
			for _, f := range report.Findings {
				wheres = append(wheres, f.Where)
			}
			assert.Contains(t, wheres, "saga ledger", "the parked instances and the gap")
			// The saga's events consumer is counted with its filter, from
			// the runner in the service's binary and from the subscription
			// record in the bare one: the step records and the
			// subscription record after its checkpoint are none of its.
			for _, opts := range []cli.Options{mounted, {}} {
				_, report := doctorJSON(t, opts, url)
				require.Len(t, report.Consumers, 1)
				c := report.Consumers[0]
				assert.Equal(t, "saga:ledger", c.Name)
				assert.True(t, c.PendingExact, "mounted: %t", opts.Service != nil)
				assert.Zero(t, c.Pending, "mounted: %t", opts.Service != nil)
			}

			// Not confirmed, stale, failing again: nothing moves.
			step("sagas-retry-not-confirmed", mounted, cli.ExitNotConfirmed, "sagas", "retry", "ledger", "a", "e/notes/1")
			step("sagas-retry-stale", mounted, cli.ExitFailed, "sagas", "retry", "ledger", "a", "e/notes/9", "--yes")
			x := l.Explain(t, "a")
			require.NotNil(t, x.Parked)
			assert.Equal(t, 2, x.Parked.Attempts, "neither retried")
			step("sagas-retry-fails", mounted, cli.ExitOK, "sagas", "retry", "ledger", "a", "e/notes/1", "--yes")
			x = l.Explain(t, "a")
			require.NotNil(t, x.Parked, "still broken: parked again")
			assert.Equal(t, 4, x.Parked.Attempts)

			// The fix, then each action for real.
			l.Broken.Store(false)
			step("sagas-retry", mounted, cli.ExitOK, "sagas", "retry", "ledger", "a", "e/notes/1", "--yes")
			x = l.Explain(t, "a")
			assert.Nil(t, x.Parked)
			assert.Equal(t, []string{"hello", "bad", "after"}, x.State.Seen, "the held note followed")

			step("sagas-skip-not-confirmed", mounted, cli.ExitNotConfirmed, "sagas", "skip", "ledger", "d", "e/notes/1")
			require.NotNil(t, l.Explain(t, "d").Parked)
			step("sagas-skip", mounted, cli.ExitOK, "sagas", "skip", "ledger", "d", "e/notes/1", "--yes")
			x = l.Explain(t, "d")
			assert.Nil(t, x.Parked)
			assert.Equal(t, []string{"hello"}, x.State.Seen, "skipped, not handled")
			step("sagas-skip-stale", mounted, cli.ExitFailed, "sagas", "skip", "ledger", "d", "e/notes/1", "--yes")

			step("sagas-release-not-confirmed", mounted, cli.ExitNotConfirmed, "sagas", "release", "ledger", "b", "notes", "1")
			step("sagas-release", mounted, cli.ExitOK, "sagas", "release", "ledger", "b", "notes", "1", "--yes")
			assert.Equal(t, []string{"hello", "late"}, l.Explain(t, "b").State.Seen)
			step("sagas-release-stale", mounted, cli.ExitFailed, "sagas", "release", "ledger", "b", "notes", "1", "--yes")

			step("sagas-redrive-no-from", mounted, cli.ExitUsage, "sagas", "redrive", "ledger", "c")
			step("sagas-redrive-past", mounted, cli.ExitUsage, "sagas", "redrive", "ledger", "c", "--from", "9", "--yes")
			step("sagas-redrive", mounted, cli.ExitOK, "sagas", "redrive", "ledger", "c", "--from", "1", "--yes")
			x = l.Explain(t, "c")
			require.NotNil(t, x.Redrive)
			assert.Equal(t, uint64(1), x.Redrive.From)
			assert.Equal(t, []string{"hello", "more"}, x.State.Seen)
			step("sagas-explain-redriven", mounted, cli.ExitOK, "sagas", "explain", "ledger", "c")

			step("sagas-deadletters-ls", mounted, cli.ExitOK, "sagas", "deadletters", "ls", "ledger")
			step("sagas-deadletters-retry", mounted, cli.ExitFailed, "sagas", "deadletters", "retry", "ledger", deadLetter, "--yes")
			step("sagas-deadletters-skip", mounted, cli.ExitOK, "sagas", "deadletters", "skip", "ledger", deadLetter, "--yes")
			for _, err := range l.Runner(t).DeadLetters(context.Background()) {
				require.NoError(t, err)
				t.Fatal("the skipped dead letter is still there")
			}
			step("sagas-ls-after", mounted, cli.ExitOK, "sagas", "ls")
			step("sagas-doctor-after", mounted, cli.ExitOK, "doctor")
		})
	}
}

// TestSagasJSON parses --json back: the field names scripts rely on.
func TestSagasJSON(t *testing.T) {
	url, store := backends()[0].create(t)
	t.Cleanup(func() { _ = store.Close() })
	l := clitest.NewLedger(t, store)
	opts := ledgerOptions(t, l)

	r := run(t, opts, "", "--store", url, "sagas", "explain", "ledger", "a", "--json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	var x struct {
		Saga     string `json:"saga"`
		Instance string `json:"instance"`
		Version  uint64 `json:"version"`
		State    struct {
			Seen []string `json:"seen"`
		} `json:"state"`
		Watermarks map[string]uint64 `json:"watermarks"`
		Held       []struct {
			ID       string `json:"id"`
			WaitsFor uint64 `json:"waits_for"`
			Behind   string `json:"behind"`
		} `json:"held"`
		Parked *struct {
			ID       string    `json:"id"`
			Kind     string    `json:"kind"`
			Error    string    `json:"error"`
			Attempts int       `json:"attempts"`
			Since    time.Time `json:"since"`
		} `json:"parked"`
		Deadlines []struct {
			Name string    `json:"name"`
			At   time.Time `json:"at"`
		} `json:"deadlines"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &x))
	assert.Equal(t, "ledger", x.Saga)
	assert.Equal(t, "a", x.Instance)
	assert.Equal(t, []string{"hello"}, x.State.Seen)
	assert.Equal(t, map[string]uint64{"notes": 0}, x.Watermarks)
	require.NotNil(t, x.Parked)
	assert.Equal(t, "e/notes/1", x.Parked.ID)
	assert.Equal(t, "event", x.Parked.Kind)
	assert.Contains(t, x.Parked.Error, "the ledger is closed")
	assert.Equal(t, 2, x.Parked.Attempts)
	require.Len(t, x.Held, 1)
	assert.Equal(t, "parked", x.Held[0].Behind)
	require.Len(t, x.Deadlines, 1)
	assert.Equal(t, "reminder", x.Deadlines[0].Name)

	r = run(t, opts, "", "--store", url, "sagas", "ls", "--json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	var types []struct {
		Saga      string `json:"saga"`
		Instances int    `json:"instances"`
		Mounted   bool   `json:"mounted"`
		Stats     struct {
			ParkedInstances  int `json:"parked_instances"`
			Gaps             int `json:"gaps"`
			DeadlinesPending int `json:"deadlines_pending"`
		} `json:"stats"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &types))
	require.Len(t, types, 1)
	assert.Equal(t, 4, types[0].Instances)
	assert.True(t, types[0].Mounted)
	assert.Equal(t, 2, types[0].Stats.ParkedInstances)
	assert.Equal(t, 1, types[0].Stats.Gaps)
	assert.Equal(t, 4, types[0].Stats.DeadlinesPending)

	// A stale action is JSON too, and changes nothing.
	r = run(t, opts, "", "--store", url, "sagas", "skip", "ledger", "a", "e/notes/2", "--yes", "--json")
	require.Equal(t, cli.ExitFailed, r.code)
	assert.Contains(t, r.stdout, `"exit_code": 1`)
	assert.Equal(t, 2, l.Explain(t, "a").Parked.Attempts)
}
