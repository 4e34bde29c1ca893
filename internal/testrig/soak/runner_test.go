package soak_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// runners starts the runner processes of one soak, one generation at a
// time, kills them, and collects what they print.
type runners struct {
	db, logPath string
	sampleEvery time.Duration
	began       time.Time
	log         *os.File

	mu      sync.Mutex
	starts  []time.Duration // when each generation started, since began
	samples []genSample
}

// genSample is a child's sample, with its generation and its time in the
// soak.
type genSample struct {
	Gen int
	At  time.Duration
	childSample
}

// child is one runner process.
type child struct {
	gen   int
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan error
	read  sync.WaitGroup
}

func newRunners(db, logPath string, sampleEvery time.Duration, began time.Time) (*runners, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	return &runners{db: db, logPath: logPath, sampleEvery: sampleEvery, began: began, log: log}, nil
}

// start starts the next generation.
func (rs *runners) start() (*child, error) {
	rs.mu.Lock()
	gen := len(rs.starts) + 1
	rs.starts = append(rs.starts, time.Since(rs.began))
	rs.mu.Unlock()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSoakChild$", "-test.v", "-test.timeout=0")
	cmd.Env = append(os.Environ(), childEnv+"=1", childDBEnv+"="+rs.db, childSampleEnv+"="+rs.sampleEvery.String())
	cmd.Stderr = rs.log
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(rs.log, "--- generation %d starts at %s\n", gen, time.Since(rs.began).Round(time.Millisecond))
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{gen: gen, cmd: cmd, stdin: stdin, done: make(chan error, 1)}
	c.read.Add(1)
	go func() {
		defer c.read.Done()
		rs.collect(gen, stdout)
	}()
	go func() {
		c.read.Wait() // Wait closes stdout: read it all first
		c.done <- cmd.Wait()
	}()
	return c, nil
}

// collect keeps the sample lines of generation gen and logs the others.
func (rs *runners) collect(gen int, stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), samplePrefix)
		if !ok {
			fmt.Fprintf(rs.log, "[%d] %s\n", gen, sc.Text())
			continue
		}
		var s childSample
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			fmt.Fprintf(rs.log, "[%d] bad sample %q: %v\n", gen, line, err)
			continue
		}
		rs.mu.Lock()
		rs.samples = append(rs.samples, genSample{Gen: gen, At: time.Since(rs.began), childSample: s})
		rs.mu.Unlock()
	}
}

// kill SIGKILLs c and waits for it to die.
func (c *child) kill() error {
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	err := <-c.done
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		return fmt.Errorf("runner %d: not ended by the SIGKILL: %v", c.gen, err)
	}
	return nil
}

// stop asks c to end (its stdin closes) and waits, at most d: Run must
// return cleanly.
func (c *child) stop(d time.Duration) error {
	_ = c.stdin.Close()
	select {
	case err := <-c.done:
		if err != nil {
			return fmt.Errorf("runner %d did not stop cleanly: %w", c.gen, err)
		}
		return nil
	case <-time.After(d):
		_ = c.cmd.Process.Signal(syscall.SIGKILL)
		<-c.done
		return fmt.Errorf("runner %d did not stop within %s", c.gen, d)
	}
}

// killLoop kills the running child at random intervals in [lo, hi) and
// starts the next at once, until the soak's time reaches until; it returns
// the child left running and how many it killed. A child that ends on its
// own is an error.
func (rs *runners) killLoop(first *child, rng *rand.Rand, lo, hi, until time.Duration) (*child, int, error) {
	c, kills := first, 0
	for {
		wait := lo + time.Duration(rng.Int64N(int64(hi-lo)))
		if time.Since(rs.began)+wait > until {
			return c, kills, nil
		}
		select {
		case err := <-c.done:
			return nil, kills, fmt.Errorf("runner %d ended on its own: %v", c.gen, err)
		case <-time.After(wait):
		}
		if err := c.kill(); err != nil {
			return nil, kills, err
		}
		kills++
		next, err := rs.start()
		if err != nil {
			return nil, kills, err
		}
		c = next
	}
}

// snapshot returns the generations' start times and the samples so far.
func (rs *runners) snapshot() ([]time.Duration, []genSample) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return append([]time.Duration(nil), rs.starts...), append([]genSample(nil), rs.samples...)
}

// tail returns the last n bytes of the runners' log.
func (rs *runners) tail(n int64) string {
	b, err := os.ReadFile(rs.logPath)
	if err != nil {
		return err.Error()
	}
	if int64(len(b)) > n {
		b = b[int64(len(b))-n:]
	}
	return string(b)
}
