package saga

import (
	"context"
	"log/slog"
	"time"

	"github.com/cairn-es/cairn/internal/backoff"
	"github.com/cairn-es/cairn/internal/failpoint"
	"github.com/cairn-es/cairn/internal/telemetry"
)

// FireDue fires every deadline due at the runner's clock's now, each as a
// step of its instance, and returns how many fired (a deadline cancelled
// or rescheduled in the meantime does not fire, and is not counted). Run
// calls it when the earliest deadline is due; tests that move a fake clock,
// and processes that fire deadlines without Run, call it themselves. It
// first loads the pending deadlines of the segments whose index is not
// whole (see [Runner.LoadDeadlines]), so that none pending at a restart,
// or after a Run that gave segments up, is missed.
func (r *Runner[S]) FireDue(ctx context.Context) (int, error) {
	if err := r.loadDeadlines(ctx); err != nil {
		return 0, err
	}
	fired := 0
	due := r.timers.popDue(r.e.now())
	for i, d := range due {
		// A deadline that fires starts a trace of its own (the passing of
		// time caused it), linked to the step that scheduled it; its step
		// is a child.
		dctx, span := r.tel.startDeadline(ctx, d)
		out, err := r.e.process(dctx, d.instance, &message{in: envelope{Deadline: d.id}})
		endDeadline(span, err)
		hit(failpoint.DeadlineAfterFire)
		if err != nil && instanceProblem(err) && ctx.Err() == nil {
			// This instance cannot take its deadline (a record of its stream
			// cannot be read, or the store refuses its step): it waits in the
			// instance's record, which the index reads again when the
			// instance moves on; the other deadlines fire.
			r.e.stats.parked.Add(1)
			r.tel.counted(dctx, parkedOut)
			r.e.log.WarnContext(dctx, "saga: a deadline cannot reach its instance; the other deadlines go on", slog.String(telemetry.LogSaga, r.e.t.name),
				slog.String(telemetry.LogInstance, d.instance), slog.String("deadline", d.id), slog.Any(telemetry.LogError, err))
			continue
		}
		if err != nil {
			for _, d := range due[i:] {
				r.timers.again(d) // they fire at the next call: this one, and those not tried yet
			}
			return fired, err
		}
		if out == handled || out == parkedOut {
			fired++
		}
	}
	return fired, nil
}

// fireWhenDue fires deadlines as they fall due, waiting on one timer for
// the earliest, until ctx ends. Before firing, it lets the events consumers
// handle what was stored (see settle).
func (r *Runner[S]) fireWhenDue(ctx context.Context) error {
	failures := 0
	for {
		at, pending, changed := r.timers.next()
		var due <-chan time.Time
		if pending {
			due = r.e.after(max(at.Sub(r.e.now()), 0))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-due:
			err := r.settle(ctx)
			if err == nil {
				_, err = r.FireDue(ctx)
			}
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				failures++
				r.e.log.WarnContext(ctx, "saga: firing deadlines failed; retrying", slog.String(telemetry.LogSaga, r.e.t.name), slog.Any(telemetry.LogError, err))
				if err := backoff.Wait(ctx, r.e.retry.Delay(failures)); err != nil {
					return nil
				}
				continue
			}
			failures = 0
		}
	}
}
