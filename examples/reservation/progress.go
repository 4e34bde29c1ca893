package main

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// progress writes a status line that a run rewrites as it goes (on a
// terminal; elsewhere, once a second), and the lines of what happens.
type progress struct {
	mu       sync.Mutex
	w        io.Writer
	terminal bool
	shown    bool // a status line is on screen
	last     time.Time
}

func newProgress(w io.Writer, terminal bool) *progress { return &progress{w: w, terminal: terminal} }

// status shows the status line.
func (p *progress) status(format string, args ...any) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	line := fmt.Sprintf(format, args...)
	switch {
	case p.terminal:
		fmt.Fprintf(p.w, "\r\033[K  %s", line)
		p.shown = true
	case time.Since(p.last) >= time.Second:
		fmt.Fprintf(p.w, "  %s\n", line)
		p.last = time.Now()
	}
}

// printf prints a line of what happened, under the status line.
func (p *progress) printf(format string, args ...any) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
	}
	fmt.Fprintf(p.w, format, args...)
}

// done ends the status line.
func (p *progress) done() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprintln(p.w)
		p.shown = false
	}
}
