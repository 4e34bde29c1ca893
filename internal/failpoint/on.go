//go:build cairnfailpoints && unix

package failpoint

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
)

// Enabled reports whether this build can crash at a failpoint: built with
// the tag cairnfailpoints on a Unix system.
const Enabled = true

// The armed spec and the hit counters are process-wide on purpose, the one
// global state in Cairn: a crash is the whole process's, and the code at a
// failpoint has no handle to pass a test's settings through. They exist
// only in builds with the tag.
var (
	armOnce sync.Once
	armed   Spec
	armErr  error
	hits    = counters()
)

func counters() map[string]*atomic.Int64 {
	m := make(map[string]*atomic.Int64)
	for _, name := range Names() {
		m[name] = new(atomic.Int64)
	}
	return m
}

// arm parses [Env] once.
func arm() (Spec, error) {
	armOnce.Do(func() { armed, armErr = Parse(os.Getenv(Env)) })
	return armed, armErr
}

// Hit counts a hit of failpoint name and, when it is the hit that [Env]
// arms, writes "failpoint: name@n: SIGKILL" to standard error and kills
// the process with SIGKILL. A name that is no failpoint is a bug in Cairn,
// and panics.
func Hit(name string) {
	c := hits[name]
	if c == nil {
		panic(fmt.Sprintf("failpoint.Hit(%q): no such failpoint", name))
	}
	n := c.Add(1)
	if s, err := arm(); err != nil || s.Name != name || s.Hit != n {
		return
	}
	fmt.Fprintf(os.Stderr, "failpoint: %s@%d: SIGKILL\n", name, n)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way; nothing of this process runs on
}

// Hits returns how many times name was hit in this process.
func Hits(name string) int64 {
	if c := hits[name]; c != nil {
		return c.Load()
	}
	return 0
}

// Armed returns the failpoint that [Env] arms (the zero Spec for none), or
// a [*SpecError] when its value names no failpoint.
func Armed() (Spec, error) { return arm() }
