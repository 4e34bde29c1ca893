package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/saga"
)

// finding is one thing doctor found that needs attention: what it is,
// where (a consumer, a saga type), since when, and what to do (a command
// to run, or what to look at). Its JSON field names are stable.
type finding struct {
	What  string    `json:"what"`
	Where string    `json:"where"`
	Since time.Time `json:"since,omitzero"`
	Do    string    `json:"do"`
}

// doctorSagas gathers the saga runners' findings.
func doctorSagas(ctx context.Context, runners []SagaRunner) ([]finding, error) {
	var all []finding
	for i, r := range runners {
		if r == nil {
			return nil, fmt.Errorf("the service's saga runner %d is nil: fix Service.Sagas in the service's set-up", i)
		}
		found, err := r.doctor(ctx)
		if err != nil {
			return nil, fmt.Errorf("saga %s: %w", r.sagaName(), err)
		}
		all = append(all, found...)
	}
	return all, nil
}

// doctorReport is doctor's result; with --json, its stable object.
type doctorReport struct {
	Healthy       bool                `json:"healthy"`
	Store         string              `json:"store"`
	SchemaVersion int                 `json:"schema_version"`
	Head          eventstore.Position `json:"head"`
	HeadRecorded  time.Time           `json:"head_recorded,omitzero"`
	Consumers     []consumerRow       `json:"consumers"`
	Sagas         []sagaCount         `json:"sagas"`
	Findings      []finding           `json:"findings"`
}

// sagaCount is the number of instances (saga: streams) of one saga type.
type sagaCount struct {
	Type      string `json:"type"`
	Instances int    `json:"instances"`
}

// storeKind names the store and the schema version it is at, as the store
// describes itself (every Cairn store does: storekit.Described); another
// store is named by its Go type, without a version.
func storeKind(store eventstore.Store) (string, int) {
	if d, ok := store.(storekit.Described); ok {
		return d.Kind()
	}
	return strings.TrimPrefix(fmt.Sprintf("%T", store), "*"), 0
}

func (a *app) doctorCommand() *cobra.Command {
	var maxLag int
	c := &cobra.Command{
		Use:   "doctor",
		Short: "Check a store's health: consumers' lag, leases and dead letters, saga instances",
		Long: `Check the store and every consumer kept in it, and list what needs attention:
dead letters; a consumer whose lease lapsed while events wait for it (no process
runs it); a consumer more than --max-lag events behind. In a service's binary,
the service's projections' figures and its sagas' own findings are added.

The events a consumer has left are counted with its filter where it is known:
a saga's consumers (from what the store records, or the service's runners) and,
in the service's binary, the service's projections. Elsewhere (a projection in
the bare binary) every event after the checkpoint is counted, an upper bound
printed with a "?" (pending_exact false in JSON), and no lag or lease finding
is made of it, since a filtered consumer's checkpoint stays at the last event
it read: check lag from the service's binary, which knows its projections'
filters. Dead letters are a finding everywhere.

Exit code 0: nothing needs attention; 3: something does (the findings say what,
where, since when and what to do).`,
		Args: args(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if maxLag < 0 {
				return usagef("--max-lag %d: a number of events, 0 or more", maxLag)
			}
			ctx := cmd.Context()
			store, svc, err := a.lookAt(ctx)
			if err != nil {
				return err
			}
			r, err := a.diagnose(ctx, store, svc, maxLag)
			if err != nil {
				return err
			}
			if err := a.emit(r, func(t *tableWriter) { r.table(t, svc != nil) }); err != nil {
				return err
			}
			if !r.Healthy {
				return fmt.Errorf("%w: %d finding(s)", ErrAttention, len(r.Findings))
			}
			return nil
		},
	}
	c.Flags().IntVar(&maxLag, "max-lag", 1000, "a consumer more events behind than this needs attention")
	return c
}

func (a *app) diagnose(ctx context.Context, store eventstore.Store, svc *Service, maxLag int) (doctorReport, error) {
	r := doctorReport{}
	r.Store, r.SchemaVersion = storeKind(store)
	head, err := readHead(ctx, store)
	if err != nil {
		return r, fmt.Errorf("reading the newest event: %w", err)
	}
	r.Head, r.HeadRecorded = head.event.Position, head.event.RecordedAt
	// One read of the head, so that the report's head and the consumers'
	// lags are measured against the same newest event.
	if r.Consumers, err = consumerRows(ctx, store, svc, head); err != nil {
		return r, err
	}
	if r.Sagas, err = sagaCounts(ctx, store); err != nil {
		return r, err
	}
	r.Findings = []finding{}
	for _, c := range r.Consumers {
		r.Findings = append(r.Findings, a.consumerFindings(c, maxLag)...)
	}
	if svc != nil {
		found, err := doctorSagas(ctx, svc.Sagas)
		if err != nil {
			return r, err
		}
		r.Findings = append(r.Findings, found...)
	}
	r.Healthy = len(r.Findings) == 0
	return r, nil
}

// consumerFindings applies doctor's rules to one consumer.
func (a *app) consumerFindings(c consumerRow, maxLag int) []finding {
	var found []finding
	where := "consumer " + c.Name
	if c.DeadLetters > 0 {
		found = append(found, finding{What: fmt.Sprintf("%d dead letter(s)", c.DeadLetters), Where: where,
			Since: c.OldestDeadLetter, Do: fmt.Sprintf("%s deadletters ls --consumer %s", a.name, c.Name)})
	}
	// An upper bound of the pending events says nothing of a filtered
	// consumer (every Cairn consumer is one): its checkpoint stays at the
	// last event it read, however many others follow. Only an exact count
	// raises a finding, or doctor would cry wolf on a healthy store.
	if !c.PendingExact {
		return found
	}
	if c.LeaseHolder != "" && !c.LeaseLive && c.Pending > 0 {
		found = append(found, finding{What: fmt.Sprintf("no process runs it: its lease lapsed with %s events pending", c.pendingCell()),
			Where: where, Since: c.LeaseExpires,
			Do: fmt.Sprintf("start the service that runs it, or find why it stopped (its lease was last held by %s)", c.LeaseHolder)})
	}
	if c.PendingCapped || c.Pending > maxLag {
		found = append(found, finding{What: fmt.Sprintf("%s events behind (lag %s), more than --max-lag %d", c.pendingCell(), c.lagCell(), maxLag),
			Where: where, Since: c.FirstPending, Do: fmt.Sprintf("%s projections status %s", a.name, c.Name)})
	}
	return found
}

// sagaCounts counts the saga instance streams per saga type, in type
// order: a type's instances are the streams "saga:<type>-<id>" (a type's
// name has no "-", which saga.New refuses), so the type is the name
// between "saga:" and the first "-", and a saga stream without one (a
// type's subscription record) holds no instance.
func sagaCounts(ctx context.Context, store eventstore.Store) ([]sagaCount, error) {
	cat, err := catalogOf(store)
	if err != nil {
		return nil, err
	}
	var counts []sagaCount
	for s, err := range cat.Streams(ctx, saga.StreamPrefix, "") {
		if err != nil {
			return nil, fmt.Errorf("listing saga instances: %w", err)
		}
		typ, _, ok := strings.Cut(strings.TrimPrefix(s.Name, saga.StreamPrefix), "-")
		if !ok {
			continue
		}
		// Streams come in name order, and the names starting with
		// "<type>-" are together, so one type's instances are too.
		if n := len(counts); n > 0 && counts[n-1].Type == typ {
			counts[n-1].Instances++
			continue
		}
		counts = append(counts, sagaCount{Type: typ, Instances: 1})
	}
	return orEmpty(counts), nil
}

func (r doctorReport) table(t *tableWriter, service bool) {
	version := "-"
	if r.SchemaVersion > 0 {
		version = fmt.Sprintf("%d (this build's: the store opened at it)", r.SchemaVersion)
	}
	t.row("store", r.Store+", schema version "+version)
	newest := "none: the log is empty"
	if !r.Head.IsZero() {
		newest = position(r.Head) + " (recorded " + when(r.HeadRecorded) + ")"
	}
	t.row("newest event", newest)
	t.line("")
	if len(r.Consumers) == 0 {
		t.line("no consumers")
	} else {
		head := []string{"CONSUMER", "CHECKPOINT", "LEASE HOLDER", "LEASE EXPIRES", "DEAD LETTERS", "OLDEST", "PENDING", "LAG"}
		if service {
			head = append(head, "SERVICE")
		}
		t.row(head...)
		for _, c := range r.Consumers {
			holder, expires := c.leaseCell()
			cells := []string{c.Name, c.checkpointCell(), holder, expires, fmt.Sprint(c.DeadLetters), when(c.OldestDeadLetter), c.pendingCell(), c.lagCell()}
			if service {
				svc := "-"
				if s := c.Stats; s != nil {
					svc = fmt.Sprintf("projection: %d handled, %d parked", s.Handled, s.Parked)
				}
				cells = append(cells, svc)
			}
			t.row(cells...)
		}
	}
	t.line("")
	if len(r.Sagas) == 0 {
		t.line("no saga instances")
	} else {
		t.row("SAGA TYPE", "INSTANCES")
		for _, s := range r.Sagas {
			t.row(s.Type, fmt.Sprint(s.Instances))
		}
	}
	t.line("")
	if r.Healthy {
		t.line("healthy: nothing needs attention")
		return
	}
	t.line("%d finding(s) need attention:", len(r.Findings))
	t.row("WHAT", "WHERE", "SINCE", "DO")
	for _, f := range r.Findings {
		t.row(f.What, f.Where, when(f.Since), f.Do)
	}
}
