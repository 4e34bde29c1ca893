package cli

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/projection"
)

// deadLetterRow is a dead letter as the deadletters commands print it with
// --json; Event (the whole stored event, data included) only in show.
type deadLetterRow struct {
	Consumer     string              `json:"consumer"`
	ID           string              `json:"id"`
	Stream       string              `json:"stream"`
	Version      uint64              `json:"version"`
	Position     eventstore.Position `json:"position"`
	Type         string              `json:"type"`
	Part         int                 `json:"part"`
	Attempts     int                 `json:"attempts"`
	FirstFailure time.Time           `json:"first_failure"`
	LastFailure  time.Time           `json:"last_failure"`
	Error        string              `json:"error"`
	Generation   uint64              `json:"generation"`
	ClaimedUntil time.Time           `json:"claimed_until,omitzero"`
	Event        *eventRow           `json:"event,omitempty"`
}

func deadLetterRowOf(d eventstore.DeadLetter, withEvent bool) deadLetterRow {
	e := d.Event
	r := deadLetterRow{
		Consumer: d.Consumer, ID: d.ID, Stream: e.StreamID, Version: e.Version, Position: e.Position, Type: e.Type,
		Part: d.Part, Attempts: d.Attempts, FirstFailure: d.FirstFailure, LastFailure: d.LastFailure,
		Error: d.Error, Generation: d.Generation, ClaimedUntil: d.ClaimedUntil,
	}
	if withEvent {
		ev := eventRowOf(e, true)
		r.Event = &ev
	}
	return r
}

// deadLetterSource is where one consumer's dead letters are read and
// skipped: the consumer's own dead letter store for a mounted projection
// (which may keep them outside the event store), else the event store.
type deadLetterSource struct {
	list func(ctx context.Context) iter.Seq2[eventstore.DeadLetter, error]
	get  func(ctx context.Context, id string) (eventstore.DeadLetter, error)
	skip func(ctx context.Context, id string) error
	// projection is the mounted projection, nil for the store's.
	projection *projection.Consumer
}

func (a *app) deadLettersOf(ctx context.Context, store eventstore.Store, svc *Service, consumer string) (deadLetterSource, error) {
	m, err := mounted(svc)
	if err != nil {
		return deadLetterSource{}, err
	}
	if p, ok := m[consumer]; ok {
		c := p.consumer()
		return deadLetterSource{
			projection: c,
			list:       c.DeadLetters,
			get: func(ctx context.Context, id string) (eventstore.DeadLetter, error) {
				for d, err := range c.DeadLetters(ctx) {
					if err != nil || d.ID == id {
						return d, err
					}
				}
				return eventstore.DeadLetter{}, &storekit.DeadLetterNotFoundError{Consumer: consumer, ID: id}
			},
			skip: c.SkipDeadLetter,
		}, nil
	}
	dls, ok := store.(storekit.DeadLetterStore)
	if !ok {
		return deadLetterSource{}, fmt.Errorf("this store (%T) keeps no dead letters", store)
	}
	if _, err := a.findConsumer(ctx, store, consumer); err != nil {
		return deadLetterSource{}, err
	}
	return deadLetterSource{
		list: func(ctx context.Context) iter.Seq2[eventstore.DeadLetter, error] {
			return dls.DeadLetters(ctx, consumer)
		},
		get: func(ctx context.Context, id string) (eventstore.DeadLetter, error) {
			return dls.DeadLetter(ctx, consumer, id)
		},
		skip: func(ctx context.Context, id string) error { return dls.DeleteDeadLetter(ctx, consumer, id) },
	}, nil
}

func (a *app) deadLettersCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "deadletters",
		Short: "List, show, skip and retry the events consumers parked after their handlers failed",
	}
	c.AddCommand(a.deadLettersLs(), a.deadLettersShow(), a.deadLettersSkip(), a.deadLettersRetry())
	return c
}

func (a *app) deadLettersLs() *cobra.Command {
	var consumer string
	c := &cobra.Command{
		Use:   "ls",
		Short: "List dead letters, oldest first: one consumer's (--consumer), or every consumer's",
		Args:  args(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			store, svc, err := a.lookAt(ctx)
			if err != nil {
				return err
			}
			names := []string{consumer}
			if consumer == "" {
				all, err := listConsumers(ctx, store)
				if err != nil {
					return err
				}
				names = names[:0]
				for _, c := range all {
					if c.DeadLetters > 0 {
						names = append(names, c.Name)
					}
				}
			}
			var rows []deadLetterRow
			for _, name := range names {
				src, err := a.deadLettersOf(ctx, store, svc, name)
				if err != nil {
					return err
				}
				for d, err := range src.list(ctx) {
					if err != nil {
						return fmt.Errorf("consumer %q: reading its dead letters: %w", name, err)
					}
					rows = append(rows, deadLetterRowOf(d, false))
				}
			}
			return a.emit(orEmpty(rows), func(t *tableWriter) {
				if len(rows) == 0 {
					t.line("no dead letters")
					return
				}
				for i, r := range rows {
					if i == 0 || rows[i-1].Consumer != r.Consumer {
						if i > 0 {
							t.line("")
						}
						t.line("consumer %s", r.Consumer)
						t.row("ID", "STREAM", "VERSION", "TYPE", "ATTEMPTS", "FIRST FAILURE", "LAST FAILURE", "ERROR")
					}
					t.row(r.ID, r.Stream, u64(r.Version), r.Type, fmt.Sprint(r.Attempts), when(r.FirstFailure), when(r.LastFailure), clipText(r.Error, 80))
				}
			})
		},
	}
	c.Flags().StringVar(&consumer, "consumer", "", "the consumer whose dead letters to list (default: every consumer's)")
	return c
}

// clipText shortens s to n runes for a table cell; show prints it whole.
func clipText(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// consumerFlag registers --consumer, which the commands on one dead letter
// need: dead letter IDs are a consumer's.
func consumerFlag(c *cobra.Command, consumer *string) {
	c.Flags().StringVar(consumer, "consumer", "", "the consumer the dead letter is of (required)")
}

func needConsumer(cmd *cobra.Command, consumer string) error {
	if consumer == "" {
		return usagef("%s needs --consumer NAME: a dead letter's ID is its consumer's (deadletters ls lists them with their consumers)", cmd.CommandPath())
	}
	return nil
}

func (a *app) deadLettersShow() *cobra.Command {
	var consumer string
	c := &cobra.Command{
		Use:   "show <id> --consumer NAME",
		Short: "Show one dead letter whole: its event (data as JSON or base64), error, attempts, failures and claim",
		Args:  args(1, "id"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if err := needConsumer(cmd, consumer); err != nil {
				return err
			}
			ctx := cmd.Context()
			store, svc, err := a.lookAt(ctx)
			if err != nil {
				return err
			}
			src, err := a.deadLettersOf(ctx, store, svc, consumer)
			if err != nil {
				return err
			}
			d, err := src.get(ctx, argv[0])
			if err != nil {
				return err
			}
			r := deadLetterRowOf(d, true)
			return a.emit(r, func(t *tableWriter) {
				t.row("consumer", r.Consumer)
				t.row("id", r.ID)
				t.row("event", fmt.Sprintf("%s version %d, position %s, part %d", r.Stream, r.Version, position(r.Position), r.Part))
				t.row("event id", r.Event.ID)
				t.row("type", fmt.Sprintf("%s (schema version %d)", r.Type, r.Event.SchemaVersion))
				t.row("recorded", when(r.Event.RecordedAt))
				t.row("data", dataCell(*r.Event))
				t.row("error", r.Error)
				t.row("attempts", fmt.Sprint(r.Attempts))
				t.row("first failure", when(r.FirstFailure))
				t.row("last failure", when(r.LastFailure))
				t.row("generation", u64(r.Generation))
				claim := "none"
				if !r.ClaimedUntil.IsZero() {
					claim = "a retry claims it until " + when(r.ClaimedUntil)
				}
				t.row("claim", claim)
			})
		},
	}
	consumerFlag(c, &consumer)
	return c
}

// settledRow is deadletters skip and retry --json.
type settledRow struct {
	Consumer string `json:"consumer"`
	ID       string `json:"id"`
	Action   string `json:"action"`
}

func (a *app) deadLettersSkip() *cobra.Command {
	var consumer string
	c := &cobra.Command{
		Use:   "skip <id> --consumer NAME",
		Short: "Delete a dead letter without handling its event",
		Long: `Delete a dead letter: its event is never handled by the consumer. In the bare
binary the dead letter is deleted from the store; in a service's binary, a
mounted projection's dead letter is skipped through the projection, which knows
where its dead letters are kept.`,
		Args: args(1, "id"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if err := needConsumer(cmd, consumer); err != nil {
				return err
			}
			ctx := cmd.Context()
			id := argv[0]
			var store eventstore.Store
			var svc *Service
			var err error
			if a.opts.Service != nil {
				svc, store, err = a.serviceOn(ctx, "")
			} else {
				store, err = a.openStore(ctx, ReadWrite)
			}
			if err != nil {
				return err
			}
			src, err := a.deadLettersOf(ctx, store, svc, consumer)
			if err != nil {
				return err
			}
			d, err := src.get(ctx, id)
			if err != nil {
				return err
			}
			where := "from the store"
			if src.projection != nil {
				where = "through the service's projection"
			}
			if err := a.confirm(fmt.Sprintf("Skip dead letter %s of consumer %s (%s version %d, %s): delete it %s; the consumer never handles that event.",
				id, consumer, d.Event.StreamID, d.Event.Version, d.Event.Type, where)); err != nil {
				return err
			}
			if err := src.skip(ctx, id); err != nil {
				return fmt.Errorf("skipping dead letter %s of consumer %q: %w", id, consumer, err)
			}
			return a.emit(settledRow{consumer, id, "skipped"}, func(t *tableWriter) {
				t.line("dead letter %s of consumer %s skipped", id, consumer)
			})
		},
	}
	consumerFlag(c, &consumer)
	return c
}

func (a *app) deadLettersRetry() *cobra.Command {
	var consumer string
	c := &cobra.Command{
		Use:   "retry <id> --consumer NAME",
		Short: "Run a projection's handler once more on a dead letter's event (in the service's binary)",
		Long: `Run the projection's handler once more on the dead letter's event; on success
the dead letter is deleted, on failure it stays parked with one more attempt.
It runs the service's handlers, so it works only in the binary of a service
that mounts the projection. A saga's dead letters are retried with the sagas
commands.`,
		Args: args(1, "id"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if err := needConsumer(cmd, consumer); err != nil {
				return err
			}
			ctx := cmd.Context()
			id := argv[0]
			p, svc, _, err := a.projectionOn(ctx, "deadletters retry", consumer, "retry dead letters of")
			if err != nil {
				return err
			}
			c := p.consumer()
			src, err := a.deadLettersOf(ctx, nil, svc, consumer)
			if err != nil {
				return err
			}
			d, err := src.get(ctx, id)
			if err != nil {
				return err
			}
			if err := a.confirm(fmt.Sprintf("Retry dead letter %s of projection %s: run its handler once more on %s version %d (%s), %d attempts so far.",
				id, consumer, d.Event.StreamID, d.Event.Version, d.Event.Type, d.Attempts)); err != nil {
				return err
			}
			if err := c.RetryDeadLetter(ctx, id); err != nil {
				var hf *projection.HandlerError
				if errors.As(err, &hf) {
					return fmt.Errorf("dead letter %s of projection %q: the handler failed again, and it stays parked: %w", id, consumer, err)
				}
				return fmt.Errorf("retrying dead letter %s of projection %q: %w", id, consumer, err)
			}
			return a.emit(settledRow{consumer, id, "retried"}, func(t *tableWriter) {
				t.line("dead letter %s of projection %s handled, and deleted", id, consumer)
			})
		},
	}
	consumerFlag(c, &consumer)
	return c
}
