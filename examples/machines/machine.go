package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairn-es/cairn/aggregate"
)

// Commands, as production machines send them.
type (
	// StartJob starts a job of Pieces pieces on an idle machine.
	StartJob struct {
		Machine, Job string
		Pieces       int
	}
	// PieceDone reports piece number Piece (1 to the job's Pieces) of job
	// Job finished. The machine's stations report pieces independently,
	// so they arrive in any order.
	PieceDone struct {
		Machine, Job string
		Piece        int
	}
	// StopForMaintenance asks for maintenance: at once on an idle machine;
	// on a busy one, as soon as its job's last piece is done.
	StopForMaintenance struct {
		Machine, By string
	}
)

// AggregateID implements command.Command.
func (c StartJob) AggregateID() string           { return c.Machine }
func (c PieceDone) AggregateID() string          { return c.Machine }
func (c StopForMaintenance) AggregateID() string { return c.Machine }

// Events.
type (
	JobStarted struct {
		Job    string `json:"job"`
		Pieces int    `json:"pieces"`
	}
	PieceFinished struct {
		Piece int `json:"piece"`
	}
	JobCompleted struct {
		Job string `json:"job"`
	}
	MaintenanceRequested struct {
		By string `json:"by"`
	}
	MaintenanceStarted struct {
		By string `json:"by"`
	}
)

// The machine's rejections: each a *TransitionError that errors.Is matches
// with one of these.
var (
	ErrJobRunning       = errors.New("a job is running")
	ErrInMaintenance    = errors.New("the machine is in maintenance")
	ErrWrongJob         = errors.New("the piece belongs to another job")
	ErrNoSuchPiece      = errors.New("the job has no piece of that number")
	ErrPieceAlreadyDone = errors.New("the piece is already done")
	ErrAlreadyStopping  = errors.New("maintenance is already requested or under way")
)

// TransitionError is a command the machine refuses in its current state.
type TransitionError struct {
	Machine string
	// State is the machine's state when it refused ("idle", "running J1
	// 7/12", ...), and Command what it refused.
	State, Command string
	Err            error
}

// Error implements error.
func (e *TransitionError) Error() string {
	return fmt.Sprintf("machine %s (%s) refuses %s: %v", e.Machine, e.State, e.Command, e.Err)
}

// Unwrap returns the reason, one of the Err values above.
func (e *TransitionError) Unwrap() error { return e.Err }

// Machine is the aggregate. It keeps the pieces of its current (or last)
// job as a set, so pieces are counted once each, in whatever order their
// reports arrive, and a sensor that fires twice is refused.
type Machine struct {
	id            string
	job           string
	pieces        int
	done          []bool // done[i-1]: piece i is done
	doneCount     int
	running       bool
	stopRequested bool
	stopBy        string
	inMaintenance bool
}

// State describes the machine for people: "idle after J1 12/12",
// "running J1 7/12", "in maintenance after J1 12/12".
func (m *Machine) State() string {
	job := "no job"
	if m.job != "" {
		job = fmt.Sprintf("%s %d/%d", m.job, m.doneCount, m.pieces)
	}
	switch {
	case m.inMaintenance:
		return "in maintenance after " + job
	case m.running && m.stopRequested:
		return "running " + job + ", maintenance requested"
	case m.running:
		return "running " + job
	}
	return "idle after " + job
}

func (m *Machine) refuse(cmd any, err error) error {
	return &TransitionError{Machine: m.id, State: m.State(), Command: fmt.Sprintf("%T%+v", cmd, cmd), Err: err}
}

// machineBindings bind each command type to the method that decides it
// and each event type to the method that applies it.
var machineBindings = []aggregate.Binding[Machine]{
	aggregate.Handles((*Machine).Start),
	aggregate.Handles((*Machine).FinishPiece),
	aggregate.Handles((*Machine).Stop),
	aggregate.Applies((*Machine).JobStarted),
	aggregate.Applies((*Machine).PieceFinished),
	aggregate.Applies((*Machine).JobCompleted),
	aggregate.Applies((*Machine).MaintenanceRequested),
	aggregate.Applies((*Machine).MaintenanceStarted),
}

// Start, FinishPiece and Stop decide. They never look at when or in which
// order commands arrived: only at the state that the machine's stored
// events give it, which the bus loaded at the version it will append after.
func (m *Machine) Start(_ context.Context, c StartJob) ([]any, error) {
	switch {
	case m.inMaintenance:
		return nil, m.refuse(c, ErrInMaintenance)
	case m.running:
		return nil, m.refuse(c, ErrJobRunning)
	}
	return []any{JobStarted{Job: c.Job, Pieces: c.Pieces}}, nil
}

func (m *Machine) FinishPiece(_ context.Context, c PieceDone) ([]any, error) {
	switch {
	case c.Job != m.job:
		return nil, m.refuse(c, ErrWrongJob)
	case c.Piece < 1 || c.Piece > m.pieces:
		return nil, m.refuse(c, ErrNoSuchPiece)
	case m.done[c.Piece-1]:
		return nil, m.refuse(c, ErrPieceAlreadyDone)
	}
	events := []any{PieceFinished{Piece: c.Piece}}
	if m.doneCount+1 == m.pieces {
		events = append(events, JobCompleted{Job: m.job})
		if m.stopRequested {
			events = append(events, MaintenanceStarted{By: m.stopBy})
		}
	}
	return events, nil
}

func (m *Machine) Stop(_ context.Context, c StopForMaintenance) ([]any, error) {
	switch {
	case m.inMaintenance || m.stopRequested:
		return nil, m.refuse(c, ErrAlreadyStopping)
	case m.running:
		return []any{MaintenanceRequested{By: c.By}}, nil
	}
	return []any{MaintenanceStarted{By: c.By}}, nil
}

// JobStarted, PieceFinished, JobCompleted, MaintenanceRequested and
// MaintenanceStarted evolve.
func (m *Machine) JobStarted(e JobStarted) {
	m.job, m.pieces, m.running = e.Job, e.Pieces, true
	m.done, m.doneCount = make([]bool, e.Pieces), 0
}

func (m *Machine) PieceFinished(e PieceFinished) {
	if e.Piece < 1 || e.Piece > len(m.done) {
		// FinishPiece never decides it: a stored stream that says so is
		// corrupt, and the load fails with an ApplyError carrying this.
		panic(fmt.Errorf("piece %d of a job of %d pieces", e.Piece, len(m.done)))
	}
	m.done[e.Piece-1] = true
	m.doneCount++
}

func (m *Machine) JobCompleted(JobCompleted) { m.running = false }

func (m *Machine) MaintenanceRequested(e MaintenanceRequested) {
	m.stopRequested, m.stopBy = true, e.By
}

func (m *Machine) MaintenanceStarted(MaintenanceStarted) {
	m.stopRequested, m.inMaintenance = false, true
}
