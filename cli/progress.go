package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress shows how far a long command (a copy, a rebuild) is: a bar with
// done/total, rate and time left on a terminal, drawn in place; elsewhere
// (a log file, CI) a line every few seconds, so that the log stays short.
// With --json nothing is drawn: stdout carries the JSON, stderr stays quiet.
type progress struct {
	bar      *progressbar.ProgressBar
	w        io.Writer
	what     string
	every    time.Duration
	started  time.Time
	lastLine time.Time
	done     int64
	total    int64
}

// plainEvery is how often progress is reported off a terminal, and
// barEvery how often a bar is redrawn on one.
const (
	plainEvery = 5 * time.Second
	barEvery   = 100 * time.Millisecond
)

func (a *app) newProgress(what string) *progress {
	now := time.Now()
	// Off a terminal the first line comes after plainEvery, so that a
	// short run prints only its last.
	p := &progress{w: a.stderr, what: what, every: plainEvery, started: now, lastLine: now}
	switch {
	case a.asJSON:
		p.w = nil
	case a.stderrIsTerminal():
		p.bar = progressbar.NewOptions64(-1,
			progressbar.OptionSetWriter(a.stderr),
			progressbar.OptionSetDescription(what),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("events"),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(barEvery),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(a.stderr) }),
		)
	}
	return p
}

// set reports done of total (total 0 or less when not known).
func (p *progress) set(done, total int64) {
	p.done, p.total = done, total
	switch {
	case p.bar != nil:
		if total > 0 && p.bar.GetMax64() != total {
			p.bar.ChangeMax64(total)
		}
		_ = p.bar.Set64(done)
	case p.w != nil && time.Since(p.lastLine) >= p.every:
		p.lastLine = time.Now()
		fmt.Fprintln(p.w, p.line())
	}
}

// finish ends the bar, or writes the last line.
func (p *progress) finish() {
	switch {
	case p.bar != nil:
		_ = p.bar.Finish()
	case p.w != nil:
		fmt.Fprintln(p.w, p.line())
	}
}

func (p *progress) line() string {
	elapsed := time.Since(p.started)
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(p.done) / s
	}
	if p.total <= 0 {
		return fmt.Sprintf("%s: %d events, %.0f events/s", p.what, p.done, rate)
	}
	eta := "-"
	if rate > 0 && p.done < p.total {
		eta = time.Duration(float64(p.total-p.done) / rate * float64(time.Second)).Round(time.Second).String()
	}
	return fmt.Sprintf("%s: %d/%d events (%.0f%%), %.0f events/s, %s left", p.what, p.done, p.total, 100*float64(p.done)/float64(p.total), rate, eta)
}
