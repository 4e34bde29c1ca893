package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync/atomic"
	"time"

	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/saga"
)

// The sale runs in a process of its own, this program started again with
// roleEnv set: so that it can be killed for real, with SIGKILL, mid-way
// through a step, and restarted.
const (
	roleEnv   = "RESERVATION_ROLE"
	roleSale  = "sale"
	configEnv = "RESERVATION_SALE"
)

// saleConfig is what the sale process needs to know, passed in configEnv.
type saleConfig struct {
	Data   string        `json:"data"`
	Store  string        `json:"store"`
	Model  string        `json:"model"`
	Window time.Duration `json:"window"`
	// Trace is the file the process writes its spans to ("" for none),
	// and Role its name in them ("sale #2").
	Trace string `json:"trace,omitempty"`
	Role  string `json:"role,omitempty"`
}

// saleReport is what a sale process that was stopped (not killed) tells:
// what its runner and its bus did.
type saleReport struct {
	Stats saga.Stats `json:"stats"`
	// Applied counts the commands the sale sent that took effect, and
	// Resent those the bus recognized as sent before (by the command ID
	// the step recorded): re-sent after the restart.
	Applied, Resent, Rejected int64
}

// saleProcess is the sale process, which restart replaces.
type saleProcess struct {
	cfg saleConfig
	// trace is the run's -trace path ("" for none) and started counts
	// the processes started, which name their spans files.
	trace   string
	started int
	*process
}

// process is one run of the sale process.
type process struct {
	cmd    *exec.Cmd
	stdin  io.Closer
	stdout bytes.Buffer
	stderr bytes.Buffer
	// done is closed when the process has ended, with err its exit error.
	done chan struct{}
	err  error
}

// startSale starts the sale process; with trace (the run's -trace path)
// set, each process it starts writes its spans beside it.
func startSale(cfg saleConfig, trace string) (*saleProcess, error) {
	s := &saleProcess{cfg: cfg, trace: trace}
	if trace != "" {
		if err := removeSaleFiles(trace); err != nil {
			return nil, fmt.Errorf("-trace: %w", err)
		}
	}
	p, err := start(s.next())
	if err != nil {
		return nil, err
	}
	s.process = p
	return s, nil
}

// next is the configuration of the next process to start.
func (s *saleProcess) next() saleConfig {
	s.started++
	cfg := s.cfg
	if s.trace != "" {
		cfg.Trace, cfg.Role = salePath(s.trace, s.started), fmt.Sprintf("sale #%d", s.started)
	}
	return cfg
}

// restart kills the process with SIGKILL (whatever it was doing stops
// where it was) and starts another; it returns the killed one's pid.
func (s *saleProcess) restart() (int, error) {
	pid := s.pid()
	if err := s.kill(); err != nil {
		return pid, err
	}
	p, err := start(s.next())
	if err != nil {
		return pid, err
	}
	s.process = p
	return pid, nil
}

// close kills the process if it runs.
func (s *saleProcess) close() {
	if s.exited() == nil {
		_ = s.kill()
	}
}

// start starts a process of this program in the sale's role.
func start(cfg saleConfig) (*process, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this program to run the sale: %w", err)
	}
	config, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	p := &process{cmd: exec.Command(exe), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), roleEnv+"="+roleSale, configEnv+"="+string(config))
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	// Closing its stdin stops the process; so does this process's end.
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the sale process: %w", err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// pid returns the process ID.
func (p *process) pid() int { return p.cmd.Process.Pid }

// kill kills the process at once (SIGKILL on Unix), and waits for its
// end.
func (p *process) kill() error {
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-p.done
	return nil
}

// stop asks the process to finish what its steps have recorded and end,
// and returns its report.
func (p *process) stop() (saleReport, error) {
	_ = p.stdin.Close()
	<-p.done
	if p.err != nil {
		return saleReport{}, fmt.Errorf("the sale process failed: %w\n%s", p.err, p.stderr.String())
	}
	var r saleReport
	if err := json.Unmarshal(p.stdout.Bytes(), &r); err != nil {
		return r, fmt.Errorf("the sale process's report: %w\n%s", err, p.stdout.String())
	}
	return r, nil
}

// exited returns an error for a process that has ended, or nil while it
// runs.
func (p *process) exited() error {
	select {
	case <-p.done:
		err := p.err
		if err == nil {
			err = errors.New("exited")
		}
		return fmt.Errorf("the sale process ended on its own: %w\n%s", err, p.stderr.String())
	default:
		return nil
	}
}

// saleFault, when a test sets it (in the test binary, which is the sale
// process too), changes a sale process's runner options to inject a fault.
var saleFault func(cfg saleConfig, store eventstore.Store, opts *saga.RunnerOptions)

// serveSale is the sale process: it runs the sale until its stdin closes,
// then sends what the steps recorded, fires the deadlines due, and writes
// its report to stdout.
func serveSale(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	var cfg saleConfig
	if err := json.Unmarshal([]byte(os.Getenv(configEnv)), &cfg); err != nil {
		return fmt.Errorf("%s: %w", configEnv, err)
	}
	m, err := modelNamed(cfg.Model)
	if err != nil {
		return err
	}
	var tel *otelSDK
	if cfg.Trace != "" {
		if tel, err = startTelemetry(cfg.Trace, cfg.Role, true); err != nil {
			return err
		}
		// The spans are written as they end; this writes the last
		// metrics. A process killed with SIGKILL never gets here.
		defer func() { _ = tel.shutdown(context.WithoutCancel(ctx)) }()
	}
	svc, err := openService(ctx, cfg.Data, cfg.Store, m)
	if err != nil {
		return err
	}
	defer svc.close()
	svc.tp, svc.mp = tel.tracerProvider(), tel.meterProvider()
	var applied, resent, rejected atomic.Int64
	bus, err := svc.newBus(func(_ context.Context, o command.Observation) {
		switch {
		case o.Result.Rejected:
			rejected.Add(1)
		case o.Err != nil:
		case o.Result.Duplicate:
			resent.Add(1)
		default:
			applied.Add(1)
		}
	})
	if err != nil {
		return err
	}
	opts := svc.runnerOptions()
	if saleFault != nil {
		saleFault(cfg, svc.store, &opts)
	}
	s, err := m.newSale(svc.reg, svc.store, bus, opts, cfg.Window)
	if err != nil {
		return err
	}
	running, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		stop()
	}()
	if err := s.runner.Run(running); err != nil {
		return err
	}
	// Graceful stop: send what the last steps recorded.
	if err := s.runner.CatchUp(ctx); err != nil {
		return err
	}
	stats, err := s.runner.Stats(ctx)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(saleReport{Stats: stats, Applied: applied.Load(), Resent: resent.Load(), Rejected: rejected.Load()})
}
