package saga

import (
	"bytes"
	"context"
	"reflect"

	"github.com/cairn-es/cairn/eventstore"
)

// CommandFate is what became of a command when [Runner.Redrive] ran an
// instance's messages again, as the bus sees it: by command ID.
type CommandFate string

const (
	// CommandAbsorbed: the re-run sends the command the first run sent,
	// under its ID, so the bus takes it once.
	CommandAbsorbed CommandFate = "absorbed"
	// CommandChanged: the re-run sends, under the first run's ID, a
	// command that differs from what the first run sent. The bus takes
	// only the first of the two it sees, and the outbox sends the first
	// run's steps before the re-run's: the first run's command is the one
	// that takes effect. When the difference matters, correct it with a
	// command of your own.
	CommandChanged CommandFate = "changed"
	// CommandSentAnew: only the re-run sends it; it goes out and takes
	// effect.
	CommandSentAnew CommandFate = "new"
	// CommandDropped: only the first run sent it. It is not sent again,
	// nor undone if the first run's outbox sent it (or sends it yet).
	CommandDropped CommandFate = "dropped"
)

// RedrivenCommand is one command of a re-driven instance.
type RedrivenCommand struct {
	ID   string
	Fate CommandFate
	// First is the command as the first run's steps sent it, and Now as
	// the re-run's steps send it: nil where that run does not send it.
	// Their Command is nil where this code cannot decode it.
	First, Now *SentCommand
}

// Redriven is what a [Runner.Redrive] did: the operator's step that set
// the instance back, the messages it runs again, and how the commands of
// the re-run compare with those of the first run.
type Redriven struct {
	// Step is the version of the operator's step, and From the step from
	// which it runs the messages again.
	Step, From uint64
	// Messages is how many messages it runs again.
	Messages int
	// Commands are, by command ID, the commands that the steps from From
	// up to Step sent (the first run) and those that the steps taking the
	// same messages (or firing the same deadlines) after Step sent (the
	// re-run): the first run's in their order, then the new ones. While the
	// re-run waits (a message parked or held again), it covers the steps
	// re-run so far.
	Commands []RedrivenCommand
}

// redriveMark is what a Redrive step records of itself, so that Explain
// can report it.
type redriveMark struct {
	Step     uint64 `json:"step"`
	From     uint64 `json:"from"`
	Messages int    `json:"messages"`
}

// redriveReport compares the commands of instance stream's first run and
// re-run around the Redrive step mark, as the instance's latest record
// (version latest) leaves them; a report of the same latest version is
// served from the runner's cache. A command this code cannot decode is
// compared by its stored bytes and listed with a nil Command; a record
// that cannot be read is passed over. The error is the store's.
func (r *Runner[S]) redriveReport(ctx context.Context, stream string, latest uint64, mark redriveMark) (Redriven, error) {
	if c, ok := r.reports.Get(stream); ok && c.latest == latest && c.report.Step == mark.Step {
		return c.report, nil
	}
	report, err := r.compareRedrive(ctx, stream, mark)
	if err == nil {
		r.reports.Put(stream, cachedReport{latest: latest, report: report})
	}
	return report, err
}

// cachedReport is a Redrive report as of the instance's latest version.
type cachedReport struct {
	latest uint64
	report Redriven
}

// reportCacheSize is how many Redrive reports a runner keeps, for the
// operators who Explain the same instances again and again.
const reportCacheSize = 256

// compareRedrive computes the report of redriveReport.
func (r *Runner[S]) compareRedrive(ctx context.Context, stream string, mark redriveMark) (Redriven, error) {
	out := Redriven{Step: mark.Step, From: mark.From, Messages: mark.Messages}
	_, taken, err := r.redriven(ctx, stream, mark.From, mark.Step, true)
	if err != nil {
		return out, err
	}
	// The keys of the messages the re-run takes again: those Redrive holds
	// again, the deadlines the first run fired (pending again, they keep
	// their IDs), and the outcomes of the commands either run sent (they
	// come back through the outbox).
	again := make(map[string]bool)
	for _, m := range taken {
		again[m.key()] = true
	}
	var order []string
	first, now := make(map[string]shownCommand), make(map[string]shownCommand)
	rerun := func(m envelope) bool {
		switch m.kind() {
		case kindRejected, kindCommand:
			_, sentFirst := first[m.Command]
			_, sentNow := now[m.Command]
			return sentFirst || sentNow || again[m.key()]
		}
		return again[m.key()]
	}
	for ev, err := range r.e.store.ReadStream(ctx, stream, eventstore.Forward(mark.From)) {
		if err != nil {
			return out, err
		}
		rec, err := decodeOutline(ev)
		if err != nil {
			continue // a damaged record: Explain and History name it; the report covers the rest
		}
		into := first
		switch {
		case ev.Version == mark.Step:
			continue
		case ev.Version < mark.Step:
			if rec.Handled.Kind == kindDeadline {
				again[rec.Handled.Message.key()] = true
			}
		case !rerun(rec.Handled.Message) || rec.Handled.Kind == kindHeld || rec.Handled.Kind == kindParked:
			continue // not (or not yet) a re-run of a message the first run took
		default:
			into = now
		}
		for _, c := range rec.Commands {
			if _, seen := into[c.ID]; seen {
				continue
			}
			// A command this code cannot decode shows with a nil Command;
			// Explain's LastStep and Unsent name the error.
			shown, _ := r.sentCommandOf(stream, ev.Version, c)
			if _, seen := first[c.ID]; !seen {
				if _, seen := now[c.ID]; !seen {
					order = append(order, c.ID)
				}
			}
			into[c.ID] = shownCommand{stored: c, shown: shown}
		}
	}
	// The first run's commands first, in their order, then the new ones.
	var news []RedrivenCommand
	for _, id := range order {
		f, inFirst := first[id]
		n, inNow := now[id]
		c := RedrivenCommand{ID: id}
		if inFirst {
			c.First = &f.shown
		}
		if inNow {
			c.Now = &n.shown
		}
		switch {
		case !inNow:
			c.Fate = CommandDropped
		case !inFirst:
			c.Fate = CommandSentAnew
			news = append(news, c)
			continue
		case f.same(n):
			c.Fate = CommandAbsorbed
		default:
			c.Fate = CommandChanged
		}
		out.Commands = append(out.Commands, c)
	}
	out.Commands = append(out.Commands, news...)
	return out, nil
}

// shownCommand is a step's command as its record stores it and as
// operators see it.
type shownCommand struct {
	stored sentCommand
	shown  SentCommand
}

// same reports whether a and b carry the same command: equal values when
// this code decodes both (whatever schema version each was stored at),
// equal stored bytes otherwise.
func (a shownCommand) same(b shownCommand) bool {
	if a.shown.Command != nil && b.shown.Command != nil {
		return reflect.DeepEqual(a.shown.Command, b.shown.Command)
	}
	x, y := a.stored.Command, b.stored.Command
	return x.Type == y.Type && x.Version == y.Version && bytes.Equal(x.Data, y.Data)
}
