package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/cli"
	"github.com/cairn-es/cairn/eventstore"
)

// doctorReport is what the doctor tests read of doctor --json.
type doctorReport struct {
	Healthy   bool `json:"healthy"`
	Consumers []struct {
		Name          string    `json:"name"`
		Pending       int       `json:"pending"`
		PendingExact  bool      `json:"pending_exact"`
		PendingCapped bool      `json:"pending_capped"`
		FirstPending  time.Time `json:"first_pending"`
	} `json:"consumers"`
	Findings []struct {
		What  string `json:"what"`
		Where string `json:"where"`
	} `json:"findings"`
}

// doctorJSON runs doctor --json with args and returns its exit code and
// report.
func doctorJSON(t *testing.T, opts cli.Options, url string, args ...string) (int, doctorReport) {
	t.Helper()
	r := run(t, opts, "", append([]string{"--store", url, "doctor", "--json"}, args...)...)
	var report doctorReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &report), r.stdout+r.stderr)
	return r.code, report
}

// whats returns the findings' what, each with its where.
func (r doctorReport) whats() []string {
	out := []string{}
	for _, f := range r.Findings {
		out = append(out, f.Where+": "+f.What)
	}
	return out
}

// TestDoctorCountsWithTheProjectionsFilter: a projection of a rare event
// type on a busy store has its checkpoint at the last event it handled and
// many events of other types after it. Its lease was released by a clean
// shutdown. In the service's binary doctor counts with its filter: nothing
// pending, healthy; a matching event after the checkpoint is pending, and
// with the lease lapsed nobody runs it, a finding; more than --max-lag of
// them, or past the cap, is one too. In the bare binary the count is an
// upper bound, and no finding is made of it.
func TestDoctorCountsWithTheProjectionsFilter(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			url, store := b.create(t)
			svc := newTallyService(t)
			w := store // where appendTally writes: the store, then reopened
			appendTally := func(n int) eventstore.Position {
				t.Helper()
				e, err := svc.reg.Encode(tallyAdded{N: n})
				require.NoError(t, err)
				res, err := w.Append(ctx, "tally-1", eventstore.Any, e)
				require.NoError(t, err)
				return res.Position
			}
			appendTally(0)
			c, err := svc.consumer(store)
			require.NoError(t, err)
			require.NoError(t, c.CatchUp(ctx))
			l, ok, err := store.(consumerStores).AcquireLease(ctx, "tally", "host-1/tally", time.Hour)
			require.NoError(t, err)
			require.True(t, ok)
			require.NoError(t, store.(consumerStores).ReleaseLease(ctx, l), "a clean shutdown")
			for i := range 20 {
				_, err := store.Append(ctx, fmt.Sprintf("busy-%d", i), eventstore.NoStream,
					eventstore.EventData{Type: "busy.thing", Data: []byte(`{}`)})
				require.NoError(t, err)
			}
			require.NoError(t, store.Close())
			tally := func(r doctorReport) (pending int, exact, capped bool, first time.Time) {
				t.Helper()
				for _, c := range r.Consumers {
					if c.Name == "tally" {
						return c.Pending, c.PendingExact, c.PendingCapped, c.FirstPending
					}
				}
				t.Fatal("doctor lists no tally consumer")
				return 0, false, false, time.Time{}
			}

			code, report := doctorJSON(t, svc.options(), url, "--max-lag", "5")
			assert.Equal(t, cli.ExitOK, code, report.whats())
			assert.True(t, report.Healthy)
			pending, exact, _, _ := tally(report)
			assert.Equal(t, 0, pending, "no tally.added after its checkpoint")
			assert.True(t, exact)

			code, report = doctorJSON(t, cli.Options{}, url, "--max-lag", "5")
			assert.Equal(t, cli.ExitOK, code, "an upper bound is no finding: %v", report.whats())
			pending, exact, _, _ = tally(report)
			assert.Equal(t, 20, pending, "every event after the checkpoint")
			assert.False(t, exact)
			r := run(t, cli.Options{}, "", "--store", url, "doctor")
			assert.Regexp(t, `(?m)^tally .* 20\? `, r.stdout, "the table marks an upper bound")

			// One tally.added after the busy events: pending, and nobody
			// runs the projection. Its lag runs from that event, the first
			// the projection reads, not from the first busy event.
			w = reopen(t, url).(eventstore.Store)
			at := appendTally(1)
			var recorded time.Time
			for e, err := range w.ReadAll(ctx, eventstore.Start, eventstore.Filter{Types: []string{"tally.added"}}) {
				require.NoError(t, err)
				if e.Position == at {
					recorded = e.RecordedAt
				}
			}
			code, report = doctorJSON(t, svc.options(), url, "--max-lag", "5")
			assert.Equal(t, cli.ExitAttention, code)
			pending, exact, _, first := tally(report)
			assert.Equal(t, 1, pending)
			assert.True(t, exact)
			assert.True(t, recorded.Equal(first), "first pending is the tally.added (%s), not a busy event (%s)", recorded, first)
			assert.Equal(t, []string{"consumer tally: no process runs it: its lease lapsed with 1 events pending"}, report.whats())
			code, report = doctorJSON(t, cli.Options{}, url, "--max-lag", "5")
			assert.Equal(t, cli.ExitOK, code, "the bare binary still cannot tell: %v", report.whats())

			// More than --max-lag, and past the cap: exact counts, so
			// findings.
			for i := range 5 {
				appendTally(2 + i)
			}
			code, report = doctorJSON(t, svc.options(), url, "--max-lag", "5")
			assert.Equal(t, cli.ExitAttention, code)
			require.Len(t, report.Findings, 2)
			assert.Regexp(t, `^consumer tally: 6 events behind \(lag .+\), more than --max-lag 5$`, report.whats()[1])
			restore := cli.SetPendingCap(3)
			defer restore()
			code, report = doctorJSON(t, svc.options(), url, "--max-lag", "100")
			assert.Equal(t, cli.ExitAttention, code)
			pending, exact, capped, _ := tally(report)
			assert.Equal(t, []any{3, true, true}, []any{pending, exact, capped})
			assert.Contains(t, report.whats()[len(report.whats())-1], "3+ events behind")
			code, report = doctorJSON(t, cli.Options{}, url, "--max-lag", "100")
			assert.Equal(t, cli.ExitOK, code, "a capped upper bound is no finding either: %v", report.whats())
		})
	}
}
