package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/saga"
)

// SagaRunner is one of the service's saga types, as the sagas commands
// use it; [Saga] makes one from a saga runner. Its methods are unexported
// so that the commands can grow without breaking the services that mount
// them: only [Saga] makes one.
type SagaRunner interface {
	sagaName() string
	// load reads what the saga's records leave parked, held and pending
	// into the runner, which otherwise knows only its own steps: a
	// command calls it before it asks for parked instances, gaps or stats.
	load(ctx context.Context) error
	stats(ctx context.Context) (sagaStats, error)
	parked() []sagaParked
	gaps() []sagaGap
	explain(ctx context.Context, id string) (sagaExplanation, error)
	retry(ctx context.Context, id, messageID string) (string, error)
	skip(ctx context.Context, id, messageID string) error
	release(ctx context.Context, id, source string, waitsFor uint64) error
	redrive(ctx context.Context, id string, from uint64) (sagaRedrive, error)
	deadLetters(ctx context.Context) iter.Seq2[eventstore.DeadLetter, error]
	retryDeadLetter(ctx context.Context, d eventstore.DeadLetter) error
	skipDeadLetter(ctx context.Context, d eventstore.DeadLetter) error
	doctor(ctx context.Context) ([]finding, error)
	// consumerFilters are the filters the runner's consumers read with,
	// by name, so that their pending events are counted exactly.
	consumerFilters() map[string]eventstore.Filter
}

// Saga makes a saga runner into what the sagas commands use. The runner
// is the service's own, built on the store the command opened (see
// [Options.Service]); the commands read it and act through it, and never
// Run it.
func Saga[S any](r *saga.Runner[S]) SagaRunner {
	return &sagaAdapter[S]{r: r, name: sagaNameOf(r)}
}

// sagaNameOf returns the saga type's name from its first segment's events
// consumer, "saga:<type>" or "saga:<type>#0/n": the runner names its type
// nowhere else without a call to the store. "" for a nil runner.
func sagaNameOf[S any](r *saga.Runner[S]) string {
	if r == nil {
		return ""
	}
	events, _, err := r.Consumers(0)
	if err != nil {
		return ""
	}
	name, _, _ := strings.Cut(strings.TrimPrefix(events, saga.StreamPrefix), "#")
	return name
}

type sagaAdapter[S any] struct {
	r    *saga.Runner[S]
	name string
}

func (s *sagaAdapter[S]) sagaName() string { return s.name }

func (s *sagaAdapter[S]) load(ctx context.Context) error {
	// LoadDeadlines reads the records once per runner and nothing on later
	// calls, so every command may ask.
	if err := s.r.LoadDeadlines(ctx); err != nil {
		return fmt.Errorf("saga %s: reading its instances' records: %w", s.name, err)
	}
	return nil
}

// sagaStats are the figures of a saga type that sagas ls shows.
type sagaStats struct {
	ParkedInstances  int       `json:"parked_instances"`
	OldestParked     time.Time `json:"oldest_parked,omitzero"`
	HeldMessages     int       `json:"held_messages"`
	Gaps             int       `json:"gaps"`
	OldestGap        time.Time `json:"oldest_gap,omitzero"`
	DeadlinesPending int       `json:"deadlines_pending"`
	NextDeadline     time.Time `json:"next_deadline,omitzero"`
	Unreadable       int64     `json:"unreadable"`
	ForgottenTypes   []string  `json:"forgotten_types,omitempty"`
}

func (s *sagaAdapter[S]) stats(ctx context.Context) (sagaStats, error) {
	st, err := s.r.Stats(ctx)
	if err != nil {
		return sagaStats{}, err
	}
	return sagaStats{st.ParkedInstances, st.OldestParked, st.HeldMessages, st.Gaps, st.OldestGap,
		st.DeadlinesPending, st.NextDeadline, st.Unreadable, st.ForgottenTypes}, nil
}

// sagaMessage is a parked message, as explain, parked and the plans of
// retry and skip show it.
type sagaMessage struct {
	ID       string    `json:"id"`
	Kind     string    `json:"kind"`
	Source   string    `json:"source,omitempty"`
	Sequence uint64    `json:"sequence"`
	Type     string    `json:"type,omitempty"`
	Deadline string    `json:"deadline,omitempty"`
	Command  string    `json:"command,omitempty"`
	Error    string    `json:"error"`
	Attempts int       `json:"attempts"`
	Since    time.Time `json:"since"`
}

func messageOf(m saga.ParkedMessage) sagaMessage {
	return sagaMessage{m.ID, m.Kind, m.Source, m.Sequence, m.Type, m.Deadline, m.Command, m.Error, m.Attempts, m.Since}
}

// sagaParked is a row of sagas parked.
type sagaParked struct {
	Instance string      `json:"instance"`
	Message  sagaMessage `json:"message"`
	Held     int         `json:"held"`
}

func (s *sagaAdapter[S]) parked() []sagaParked {
	rows := []sagaParked{}
	for _, p := range s.r.Parked() {
		rows = append(rows, sagaParked{p.Instance, messageOf(p.Message), p.Held})
	}
	return rows
}

// sagaGap is a row of sagas gaps.
type sagaGap struct {
	Instance string    `json:"instance"`
	Source   string    `json:"source"`
	WaitsFor uint64    `json:"waits_for"`
	Held     int       `json:"held"`
	Since    time.Time `json:"since"`
}

func (s *sagaAdapter[S]) gaps() []sagaGap {
	rows := []sagaGap{}
	for _, g := range s.r.Gaps() {
		rows = append(rows, sagaGap{g.Instance, g.Source, g.WaitsFor, g.Held, g.Since})
	}
	return rows
}

// sagaHeld is a message an instance holds, in explain.
type sagaHeld struct {
	ID       string    `json:"id"`
	Kind     string    `json:"kind"`
	Source   string    `json:"source"`
	Sequence uint64    `json:"sequence"`
	Type     string    `json:"type,omitempty"`
	Command  string    `json:"command,omitempty"`
	WaitsFor uint64    `json:"waits_for"`
	Behind   string    `json:"behind"` // "gap" or "parked": what it waits for
	Since    time.Time `json:"since"`
}

// sagaCommand is a command a step sent, in explain and redrive.
type sagaCommand struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Command json.RawMessage `json:"command"` // null when this code cannot decode it
}

func commandOf(c saga.SentCommand) sagaCommand {
	return sagaCommand{c.ID, c.Type, rawJSON(c.Command)}
}

func commandsOf(cs []saga.SentCommand) []sagaCommand {
	out := []sagaCommand{}
	for _, c := range cs {
		out = append(out, commandOf(c))
	}
	return out
}

// rawJSON is v as JSON; null for nil, or for a value that has no JSON
// form (explain still shows the rest).
func rawJSON(v any) json.RawMessage {
	if v == nil {
		return json.RawMessage("null")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}

// sagaDeadline is a pending deadline.
type sagaDeadline struct {
	ID   string    `json:"id"`
	Name string    `json:"name"`
	At   time.Time `json:"at"`
}

// sagaStep is an instance's latest step.
type sagaStep struct {
	Version   uint64        `json:"version"`
	Kind      string        `json:"kind"`
	Source    string        `json:"source,omitempty"`
	Sequence  uint64        `json:"sequence"`
	Type      string        `json:"type,omitempty"`
	At        time.Time     `json:"at"`
	Commands  []sagaCommand `json:"commands"`
	Completed bool          `json:"completed"`
}

// sagaRedrive is what a redrive did, or the latest one in explain.
type sagaRedrive struct {
	Step     uint64               `json:"step"`
	From     uint64               `json:"from"`
	Messages int                  `json:"messages"`
	Commands []sagaRedriveCommand `json:"commands"`
}

// sagaRedriveCommand is a command's fate in a redrive.
type sagaRedriveCommand struct {
	ID    string          `json:"id"`
	Fate  string          `json:"fate"`
	Type  string          `json:"type"`
	First json.RawMessage `json:"first"` // as the first run sent it; null if it did not
	Now   json.RawMessage `json:"now"`   // as the re-run sends it; null if it does not
}

func redriveOf(r saga.Redriven) sagaRedrive {
	out := sagaRedrive{Step: r.Step, From: r.From, Messages: r.Messages, Commands: []sagaRedriveCommand{}}
	for _, c := range r.Commands {
		rc := sagaRedriveCommand{ID: c.ID, Fate: string(c.Fate), First: json.RawMessage("null"), Now: json.RawMessage("null")}
		if c.First != nil {
			rc.Type, rc.First = c.First.Type, rawJSON(c.First.Command)
		}
		if c.Now != nil {
			rc.Type, rc.Now = c.Now.Type, rawJSON(c.Now.Command)
		}
		out.Commands = append(out.Commands, rc)
	}
	return out
}

// sagaExplanation is sagas explain's answer.
type sagaExplanation struct {
	Saga      string `json:"saga"`
	Instance  string `json:"instance"`
	Stream    string `json:"stream"`
	Exists    bool   `json:"exists"`
	Version   uint64 `json:"version"`
	Started   bool   `json:"started"`
	Completed bool   `json:"completed"`
	// State is the state as encoding/json writes it; null when this code
	// cannot read it (Unreadable says why).
	State      json.RawMessage     `json:"state"`
	Watermarks map[string]uint64   `json:"watermarks"`
	OutOfOrder map[string][]uint64 `json:"out_of_order"`
	Pending    map[string]uint64   `json:"pending"`
	Held       []sagaHeld          `json:"held"`
	Parked     *sagaMessage        `json:"parked"`
	Deadlines  []sagaDeadline      `json:"deadlines"`
	Unsent     []sagaCommand       `json:"unsent"`
	LastStep   sagaStep            `json:"last_step"`
	Redrive    *sagaRedrive        `json:"redrive"`
	// Unreadable names what this code could not read of the instance.
	Unreadable string `json:"unreadable,omitempty"`
}

// errNoInstance is explain's error for an instance with no step.
var errNoInstance = errors.New("no such instance")

func (s *sagaAdapter[S]) explain(ctx context.Context, id string) (sagaExplanation, error) {
	x, err := s.r.Explain(ctx, id)
	if err != nil && x.Instance == "" {
		return sagaExplanation{}, err // nothing read: the store failed
	}
	if !x.Exists {
		return sagaExplanation{}, fmt.Errorf("saga %s: instance %q: %w (stream %s holds no step)", s.name, id, errNoInstance, x.Stream)
	}
	out := sagaExplanation{Saga: s.name, Instance: x.Instance, Stream: x.Stream, Exists: x.Exists, Version: x.Version,
		Started: x.Started, Completed: x.Completed, State: json.RawMessage("null"),
		Watermarks: orEmptyMap(x.Watermarks), OutOfOrder: orEmptyMap(x.OutOfOrder), Pending: orEmptyMap(x.Pending),
		Held: []sagaHeld{}, Deadlines: []sagaDeadline{}, Unsent: commandsOf(x.Unsent)}
	if x.State != nil {
		out.State = rawJSON(x.State)
	}
	if err != nil {
		out.Unreadable = err.Error()
	}
	for _, h := range x.Held {
		behind := "gap"
		if h.WaitsFor == h.Sequence {
			behind = "parked"
		}
		out.Held = append(out.Held, sagaHeld{h.ID, h.Kind, h.Source, h.Sequence, h.Type, h.Command, h.WaitsFor, behind, h.Since})
	}
	if x.Parked != nil {
		m := messageOf(*x.Parked)
		out.Parked = &m
	}
	for _, d := range x.Deadlines {
		out.Deadlines = append(out.Deadlines, sagaDeadline{d.ID, d.Name, d.At})
	}
	l := x.LastStep
	out.LastStep = sagaStep{l.Version, l.Kind, l.Source, l.Sequence, l.Type, l.At, commandsOf(l.Commands), l.Completed}
	if x.Redrive != nil {
		r := redriveOf(*x.Redrive)
		out.Redrive = &r
	}
	return out, nil
}

func orEmptyMap[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return map[K]V{}
	}
	return m
}

func (s *sagaAdapter[S]) retry(ctx context.Context, id, messageID string) (string, error) {
	out, err := s.r.Retry(ctx, id, messageID)
	if err != nil {
		return "", err
	}
	return out.String(), nil
}

func (s *sagaAdapter[S]) skip(ctx context.Context, id, messageID string) error {
	return s.r.Skip(ctx, id, messageID)
}

func (s *sagaAdapter[S]) release(ctx context.Context, id, source string, waitsFor uint64) error {
	return s.r.Release(ctx, id, source, waitsFor)
}

func (s *sagaAdapter[S]) redrive(ctx context.Context, id string, from uint64) (sagaRedrive, error) {
	r, err := s.r.Redrive(ctx, id, from)
	if err != nil {
		return sagaRedrive{}, err
	}
	return redriveOf(r), nil
}

func (s *sagaAdapter[S]) deadLetters(ctx context.Context) iter.Seq2[eventstore.DeadLetter, error] {
	return s.r.DeadLetters(ctx)
}

func (s *sagaAdapter[S]) retryDeadLetter(ctx context.Context, d eventstore.DeadLetter) error {
	return s.r.RetryDeadLetter(ctx, d)
}

func (s *sagaAdapter[S]) skipDeadLetter(ctx context.Context, d eventstore.DeadLetter) error {
	return s.r.SkipDeadLetter(ctx, d)
}

func (s *sagaAdapter[S]) consumerFilters() map[string]eventstore.Filter {
	if s.r == nil {
		return nil
	}
	return s.r.ConsumerFilters()
}

// doctor is doctor's look at the saga type: parked instances and
// gaps (with the oldest), records this code cannot read, event types the
// saga read before and no longer reads. It loads the records first, so
// that it sees what the production runners left.
func (s *sagaAdapter[S]) doctor(ctx context.Context) ([]finding, error) {
	if err := s.load(ctx); err != nil {
		return nil, err
	}
	st, err := s.r.Stats(ctx)
	if err != nil {
		return nil, err
	}
	where := "saga " + s.name
	var out []finding
	if st.ParkedInstances > 0 {
		out = append(out, finding{fmt.Sprintf("%d instance(s) parked on a message", st.ParkedInstances), where, st.OldestParked,
			fmt.Sprintf("sagas parked %s, then sagas explain, fix the cause, and sagas retry or sagas skip each", s.name)})
	}
	if st.Gaps > 0 {
		out = append(out, finding{fmt.Sprintf("%d gap(s): held deliveries wait for a missing message", st.Gaps), where, st.OldestGap,
			fmt.Sprintf("sagas gaps %s; wait for the source, or sagas release a gap that will never fill", s.name)})
	}
	if st.Unreadable > 0 {
		out = append(out, finding{fmt.Sprintf("%d step record(s) this code cannot read", st.Unreadable), where, time.Time{},
			"deploy the upcaster the runner's log names, then sagas retry the parked messages"})
	}
	if len(st.ForgottenTypes) > 0 {
		out = append(out, finding{"event types the saga read before and this code no longer reads: " + strings.Join(st.ForgottenTypes, ", "),
			where, time.Time{}, "register their upcast.Rename, or upcast.Drop them; Run refuses to start until then"})
	}
	return out, nil
}
