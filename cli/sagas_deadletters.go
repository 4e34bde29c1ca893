package cli

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/cairn-es/cairn/eventstore"
)

// A saga's consumers park what reaches no instance (an event that does not
// decode, or whose mapping finds no instance ID) and the step records their
// outbox kept failing on as dead letters, under the saga's own consumer
// names. They are handed back through the runner, which knows which of its
// consumers each belongs to; the deadletters command points saga
// consumers here.

func (a *app) sagasDeadLetters() *cobra.Command {
	c := &cobra.Command{
		Use:   "deadletters",
		Short: "List, retry and skip the dead letters of a saga's consumers",
		Long: `A saga's consumers keep as dead letters the stored events that reach no
instance (they do not decode, or their mapping finds no instance ID) and the
step records whose commands the outbox could not send. Retry hands one back,
through the service's code, once the cause is fixed; skip drops it. Hand back an
instance's dead letters oldest first (ls lists them so).`,
	}
	c.AddCommand(&cobra.Command{
		Use:   "ls <type>",
		Short: "List a saga type's dead letters, each consumer's oldest first",
		Args:  args(1, "type"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx := cmd.Context()
			s, err := a.sagaNamed(ctx, "sagas deadletters ls", argv[0])
			if err != nil {
				return err
			}
			rows := []deadLetterRow{}
			for d, err := range s.deadLetters(ctx) {
				if err != nil {
					return err
				}
				rows = append(rows, deadLetterRowOf(d, false))
			}
			return a.emit(rows, func(t *tableWriter) {
				t.row("ID", "CONSUMER", "STREAM", "VERSION", "TYPE", "ATTEMPTS", "LAST FAILURE", "ERROR")
				for _, r := range rows {
					t.row(r.ID, r.Consumer, r.Stream, u64(r.Version), r.Type, strconv.Itoa(r.Attempts), when(r.LastFailure), r.Error)
				}
			})
		},
	})
	c.AddCommand(a.sagaDeadLetterAction("retry", "Hand a dead letter back to the saga"),
		a.sagaDeadLetterAction("skip", "Drop a dead letter: its event never reaches an instance"))
	return c
}

// sagaDeadLetterAction makes retry or skip of one dead letter.
func (a *app) sagaDeadLetterAction(action, short string) *cobra.Command {
	return &cobra.Command{
		Use:   action + " <type> <dead-letter-id>",
		Short: short,
		Args:  args(2, "type", "dead-letter-id"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx := cmd.Context()
			s, err := a.sagaNamed(ctx, "sagas deadletters "+action, argv[0])
			if err != nil {
				return err
			}
			d, err := findDeadLetter(ctx, s, argv[1])
			if err != nil {
				return err
			}
			verb := "hand back"
			if action == "skip" {
				verb = "drop (never handled)"
			}
			if err := a.confirm(fmt.Sprintf("%s dead letter %s of consumer %s: event %s (%s, stream %s version %d), failed %d time(s): %s",
				verb, d.ID, d.Consumer, d.Event.ID, d.Event.Type, d.Event.StreamID, d.Event.Version, d.Attempts, oneLine(d.Error))); err != nil {
				return err
			}
			if action == "skip" {
				err = s.skipDeadLetter(ctx, d)
			} else {
				err = s.retryDeadLetter(ctx, d)
			}
			if err != nil {
				// A retry that fails again leaves the dead letter, its
				// attempts counted; a changed one was left as it was.
				return fmt.Errorf("dead letter %s: %s: %w", d.ID, action, err)
			}
			return a.emit(struct {
				Saga       string `json:"saga"`
				Action     string `json:"action"`
				DeadLetter string `json:"dead_letter"`
			}{s.sagaName(), action, d.ID}, func(t *tableWriter) {
				t.line("%s dead letter %s: done", action, d.ID)
			})
		},
	}
}

func findDeadLetter(ctx context.Context, s SagaRunner, id string) (eventstore.DeadLetter, error) {
	for d, err := range s.deadLetters(ctx) {
		if err != nil {
			return eventstore.DeadLetter{}, err
		}
		if d.ID == id {
			return d, nil
		}
	}
	return eventstore.DeadLetter{}, fmt.Errorf("saga %s has no dead letter %q (sagas deadletters ls %s lists them): %w", s.sagaName(), id, s.sagaName(), errNotFound)
}
