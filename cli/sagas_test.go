package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/cli"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/retry"
	"github.com/cairn-es/cairn/saga"
	"github.com/cairn-es/cairn/saga/sagatest"
)

// The sagas commands run on a small saga, "ledger", whose instances take
// notes delivered from a source "notes": a note "bad" fails while the
// ledger is broken (and parks), "hello" schedules a reminder, "more"
// sends a Ping whose N says whether the ledger was broken when it was
// decided (so that a redrive after the fix changes it).
type (
	ledgerState struct {
		Seen []string `json:"seen"`
	}
	note struct {
		ID   string `json:"id"`
		Text string `json:"text"`
	}
	ping struct {
		ID string `json:"id"`
		N  int    `json:"n"`
	}
	reminder struct{}
)

func (p ping) AggregateID() string { return p.ID }

// ledger is one backend's ledger saga: its store, its clock, and whether
// its handlers are broken (what an operator's fix turns off).
type ledger struct {
	store  eventstore.Store
	clock  *sagatest.Clock
	broken atomic.Bool
}

// runner makes a runner of the ledger saga on l's store, as the
// service's binary does for each command.
func (l *ledger) runner(t *testing.T) *saga.Runner[ledgerState] {
	t.Helper()
	return l.runnerOn(t, l.store)
}

func (l *ledger) runnerOn(t *testing.T, store eventstore.Store) *saga.Runner[ledgerState] {
	t.Helper()
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, errors.Join(
		codec.Register[ledgerState](reg, "ledger.state", 1),
		codec.Register[note](reg, "note", 1),
		codec.Register[ping](reg, "ping", 1),
		codec.Register[reminder](reg, "reminder", 1),
	))
	typ, err := saga.New[ledgerState]("ledger", reg, saga.Options[ledgerState]{})
	require.NoError(t, err)
	require.NoError(t, saga.Sends[ledgerState, ping](typ))
	require.NoError(t, saga.On(typ, saga.Event[ledgerState, note]{
		Instance: func(e note, _ eventstore.Metadata) string { return e.ID },
		Starts:   true,
		Handle: func(_ context.Context, s *ledgerState, e note, out *saga.Output) error {
			switch e.Text {
			case "bad":
				if l.broken.Load() {
					return errors.New("the ledger is closed")
				}
			case "hello":
				out.ScheduleAfter("reminder", time.Hour, reminder{})
			case "more":
				n := 1
				if !l.broken.Load() {
					n = 2
				}
				out.Send(ping{ID: e.ID, N: n})
			}
			s.Seen = append(s.Seen, e.Text)
			return nil
		}}))
	require.NoError(t, saga.OnDeadline(typ, "reminder", func(context.Context, *ledgerState, reminder, *saga.Output) error { return nil }))
	r, err := saga.NewRunner(typ, store, nil, saga.RunnerOptions{Clock: l.clock,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Retry:  retry.Policy{Attempts: 2, Initial: time.Microsecond, Max: time.Microsecond}})
	require.NoError(t, err)
	return r
}

// options mount the ledger saga, as a service's binary does.
func (l *ledger) options(t *testing.T) cli.Options {
	return cli.Options{Service: func(_ context.Context, store eventstore.Store) (*cli.Service, error) {
		return &cli.Service{Sagas: []cli.SagaRunner{cli.Saga(l.runnerOn(t, store))}}, nil
	}}
}

// newLedger builds the ledger's instances on store: a parked on its
// note 1 with note 2 held behind it; b waiting for note 1 (a gap) with
// note 2 held; c that sent a ping; d parked on its note 1; and a stored
// note that names no instance, a dead letter of the saga's consumer.
func newLedger(t *testing.T, store eventstore.Store) *ledger {
	t.Helper()
	ctx := context.Background()
	l := &ledger{store: store, clock: sagatest.NewClock(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))}
	l.broken.Store(true)
	r := l.runner(t)
	_, err := store.Append(ctx, "note-lost", eventstore.NoStream, eventstore.EventData{
		ID: eventID(1000), Type: "note", Data: []byte(`{"id":"","text":"lost"}`)})
	require.NoError(t, err)
	require.NoError(t, r.CatchUp(ctx), "parks the note that names no instance")

	deliver := func(id string, seq uint64, text string, want saga.Outcome) {
		t.Helper()
		out, err := r.Deliver(ctx, saga.Delivery{Source: "notes", Sequence: seq, Event: note{id, text}})
		require.NoError(t, err)
		require.Equal(t, want, out, "%s: note %d %q", id, seq, text)
	}
	deliver("a", 0, "hello", saga.Handled)
	deliver("a", 1, "bad", saga.Parked)
	deliver("a", 2, "after", saga.Held)
	l.clock.Advance(time.Minute)
	deliver("b", 0, "hello", saga.Handled)
	deliver("b", 2, "late", saga.Held)
	l.clock.Advance(time.Minute)
	deliver("c", 0, "hello", saga.Handled)
	deliver("c", 1, "more", saga.Handled)
	l.clock.Advance(time.Minute)
	deliver("d", 0, "hello", saga.Handled)
	deliver("d", 1, "bad", saga.Parked)
	return l
}

// explain is instance id as a fresh runner reads it from the store.
func (l *ledger) explain(t *testing.T, id string) saga.Explanation[ledgerState] {
	t.Helper()
	x, err := l.runner(t).Explain(context.Background(), id)
	require.NoError(t, err)
	return x
}

// TestGoldenSagas runs every sagas command on the ledger, on every
// backend, in an order in which each acts on what the ones before left,
// and checks each action's effect through a runner.
func TestGoldenSagas(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			url, store := b.create(t)
			t.Cleanup(func() { _ = store.Close() })
			l := newLedger(t, store)
			mounted := l.options(t)
			var deadLetter string
			for d, err := range l.runner(t).DeadLetters(context.Background()) {
				require.NoError(t, err)
				deadLetter = d.ID
			}
			require.NotEmpty(t, deadLetter)

			step := func(name string, opts cli.Options, want int, args ...string) result {
				t.Helper()
				r := run(t, opts, "", append([]string{"--store", url}, args...)...)
				golden(t, name, r.stdout+"--- stderr\n"+r.stderr+"--- exit "+itoa(r.code)+"\n")
				require.Equal(t, want, r.code, "%s: %s", name, r.stderr)
				return r
			}
			step("sagas-ls-bare", cli.Options{}, cli.ExitOK, "sagas", "ls")
			step("sagas-ls", mounted, cli.ExitOK, "sagas", "ls")
			step("sagas-ls-type", mounted, cli.ExitOK, "sagas", "ls", "ledger")
			step("sagas-ls-type-page", cli.Options{}, cli.ExitOK, "sagas", "ls", "ledger", "--after", "a", "--limit", "2")
			step("sagas-ls-unknown", mounted, cli.ExitUsage, "sagas", "ls", "nope")
			step("sagas-explain-bare", cli.Options{}, cli.ExitFailed, "sagas", "explain", "ledger", "a")
			step("sagas-explain-parked", mounted, cli.ExitOK, "sagas", "explain", "ledger", "a")
			step("sagas-explain-gap", mounted, cli.ExitOK, "sagas", "explain", "ledger", "b")
			step("sagas-explain-no-instance", mounted, cli.ExitFailed, "sagas", "explain", "ledger", "zz")
			step("sagas-parked", mounted, cli.ExitOK, "sagas", "parked", "ledger")
			step("sagas-gaps", mounted, cli.ExitOK, "sagas", "gaps", "ledger")
			step("sagas-unknown-type", mounted, cli.ExitUsage, "sagas", "parked", "nope")
			// Only the service's binary sees the parked instances and gaps.
			step("sagas-doctor-bare", cli.Options{}, cli.ExitAttention, "doctor")
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
			x := l.explain(t, "a")
			require.NotNil(t, x.Parked)
			assert.Equal(t, 2, x.Parked.Attempts, "neither retried")
			step("sagas-retry-fails", mounted, cli.ExitOK, "sagas", "retry", "ledger", "a", "e/notes/1", "--yes")
			x = l.explain(t, "a")
			require.NotNil(t, x.Parked, "still broken: parked again")
			assert.Equal(t, 4, x.Parked.Attempts)

			// The fix, then each action for real.
			l.broken.Store(false)
			step("sagas-retry", mounted, cli.ExitOK, "sagas", "retry", "ledger", "a", "e/notes/1", "--yes")
			x = l.explain(t, "a")
			assert.Nil(t, x.Parked)
			assert.Equal(t, []string{"hello", "bad", "after"}, x.State.Seen, "the held note followed")

			step("sagas-skip-not-confirmed", mounted, cli.ExitNotConfirmed, "sagas", "skip", "ledger", "d", "e/notes/1")
			require.NotNil(t, l.explain(t, "d").Parked)
			step("sagas-skip", mounted, cli.ExitOK, "sagas", "skip", "ledger", "d", "e/notes/1", "--yes")
			x = l.explain(t, "d")
			assert.Nil(t, x.Parked)
			assert.Equal(t, []string{"hello"}, x.State.Seen, "skipped, not handled")
			step("sagas-skip-stale", mounted, cli.ExitFailed, "sagas", "skip", "ledger", "d", "e/notes/1", "--yes")

			step("sagas-release-not-confirmed", mounted, cli.ExitNotConfirmed, "sagas", "release", "ledger", "b", "notes", "1")
			step("sagas-release", mounted, cli.ExitOK, "sagas", "release", "ledger", "b", "notes", "1", "--yes")
			assert.Equal(t, []string{"hello", "late"}, l.explain(t, "b").State.Seen)
			step("sagas-release-stale", mounted, cli.ExitFailed, "sagas", "release", "ledger", "b", "notes", "1", "--yes")

			step("sagas-redrive-no-from", mounted, cli.ExitUsage, "sagas", "redrive", "ledger", "c")
			step("sagas-redrive-past", mounted, cli.ExitUsage, "sagas", "redrive", "ledger", "c", "--from", "9", "--yes")
			step("sagas-redrive", mounted, cli.ExitOK, "sagas", "redrive", "ledger", "c", "--from", "1", "--yes")
			x = l.explain(t, "c")
			require.NotNil(t, x.Redrive)
			assert.Equal(t, uint64(1), x.Redrive.From)
			assert.Equal(t, []string{"hello", "more"}, x.State.Seen)
			step("sagas-explain-redriven", mounted, cli.ExitOK, "sagas", "explain", "ledger", "c")

			step("sagas-deadletters-ls", mounted, cli.ExitOK, "sagas", "deadletters", "ls", "ledger")
			step("sagas-deadletters-retry", mounted, cli.ExitFailed, "sagas", "deadletters", "retry", "ledger", deadLetter, "--yes")
			step("sagas-deadletters-skip", mounted, cli.ExitOK, "sagas", "deadletters", "skip", "ledger", deadLetter, "--yes")
			for _, err := range l.runner(t).DeadLetters(context.Background()) {
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
	l := newLedger(t, store)
	opts := l.options(t)

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
	assert.Equal(t, 2, l.explain(t, "a").Parked.Attempts)
}
