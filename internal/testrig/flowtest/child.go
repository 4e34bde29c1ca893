package flowtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Child is a child process of a crash test, its standard output and error
// collected.
type Child struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
	err  error
}

// StartChild starts cmd, collecting what it writes.
func StartChild(cmd *exec.Cmd) (*Child, error) {
	c := &Child{cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = c, c
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// Write collects the child's output.
func (c *Child) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.Write(p)
}

// Output returns what the child wrote so far.
func (c *Child) Output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

// Done is closed when the child has ended.
func (c *Child) Done() <-chan struct{} { return c.done }

// Err returns how the child ended (exec.Cmd.Wait's error), once Done is
// closed.
func (c *Child) Err() error { return c.err }

// Killed reports whether the child, which has ended, died of SIGKILL.
func (c *Child) Killed() bool {
	var exit *exec.ExitError
	if !errors.As(c.err, &exit) {
		return false
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// Kill kills the child with SIGKILL and waits for its end.
func (c *Child) Kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

// Wait waits for the child's end; after limit it kills it, and returns an
// error saying so.
func (c *Child) Wait(limit time.Duration) error {
	select {
	case <-c.done:
		return nil
	case <-time.After(limit):
		c.Kill()
		return fmt.Errorf("flowtest: the child did not end within %v; killed it", limit)
	}
}

// WaitFile waits until the file at path exists and reports true, or until
// the child ends and reports false; after limit it kills the child and
// returns an error.
func (c *Child) WaitFile(path string, limit time.Duration) (bool, error) {
	deadline := time.Now().Add(limit)
	for {
		if _, err := os.Stat(path); err == nil {
			return true, nil
		}
		select {
		case <-c.done:
			return false, nil
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.Kill()
			return false, fmt.Errorf("flowtest: the child did not create %s within %v; killed it", path, limit)
		}
	}
}
