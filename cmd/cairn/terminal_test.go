package main_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
)

// terminal is a tmux server of the test's own (its socket in the test's
// folder, so that no other tmux is touched) with one window of a fixed
// size, in which the test types as a person would and reads the screen
// as they see it: capture-pane gives the pane's lines after the terminal
// has applied every carriage return and erase, not the bytes written.
type terminal struct {
	t      *testing.T
	socket string
}

func newTerminal(t *testing.T) *terminal {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("tmux is not installed: the terminal sessions need it (.ci/run installs it)")
		}
		t.Skip("tmux is not installed: skipping the terminal sessions")
	}
	// A short path: a Unix socket's path is limited to about 100 bytes,
	// which t.TempDir's can pass.
	dir, err := os.MkdirTemp("", "cairn-tmux-")
	require.NoError(t, err)
	term := &terminal{t: t, socket: filepath.Join(dir, "s")}
	t.Cleanup(func() {
		_ = exec.Command("tmux", "-S", term.socket, "kill-server").Run()
		_ = os.RemoveAll(dir)
	})
	// sh, with no rc file, as the shell: the prompt and the environment
	// are the same on every machine. TERM is a terminal that the bar
	// library and tmux agree on.
	term.tmux("-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "30", "-s", "cairn",
		"env", "PS1=$ ", "TERM=screen", "CAIRN_STORE=", "sh")
	return term
}

func (term *terminal) tmux(args ...string) string {
	term.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", term.socket}, args...)...).CombinedOutput()
	require.NoError(term.t, err, "tmux %s: %s", strings.Join(args, " "), out)
	return string(out)
}

// typeLine types line and Enter.
func (term *terminal) typeLine(line string) {
	term.t.Helper()
	term.tmux("send-keys", "-t", "cairn", "-l", line)
	term.tmux("send-keys", "-t", "cairn", "Enter")
}

// screen is what the window shows now.
func (term *terminal) screen() string {
	term.t.Helper()
	return term.tmux("capture-pane", "-p", "-t", "cairn")
}

// waitFor polls the screen every 50 ms until it matches re and returns
// it. The deadline is for a command that hangs, not a measure of speed.
func (term *terminal) waitFor(re *regexp.Regexp) string {
	term.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		s := term.screen()
		if re.MatchString(s) {
			return s
		}
		require.True(term.t, time.Now().Before(deadline), "the screen never showed %s; it shows:\n%s", re, s)
		time.Sleep(50 * time.Millisecond)
	}
}

// clear clears the screen, so that the next command's output is all on it.
func (term *terminal) clear() {
	term.t.Helper()
	term.typeLine("clear")
	term.tmux("clear-history", "-t", "cairn")
	term.waitFor(regexp.MustCompile(`\A\$ ?\n`))
}

// bigStore makes a SQLite store of n events whose appends interleave over
// many streams, so that a copy appends them one by one and takes seconds
// to copy: long enough to be seen drawing its bar.
func bigStore(t *testing.T, path string, n int) {
	t.Helper()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	defer s.Close()
	for i := range n {
		_, err := s.Append(ctx, fmt.Sprintf("order-%d", i%500), eventstore.Any,
			eventstore.EventData{Type: "order.noted", SchemaVersion: 1, Data: fmt.Appendf(nil, `{"n":%d}`, i)})
		require.NoError(t, err)
	}
}

func eventsIn(t *testing.T, path string) int64 {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{ReadOnly: true})
	require.NoError(t, err)
	defer s.Close()
	return countEvents(t, s)
}

// TestTerminalSessions drives cairn at a real terminal: the copy's plan
// and prompt, a refusal, the bar drawn in place while it copies, its
// report, and a reset of a projection confirmed at the prompt.
func TestTerminalSessions(t *testing.T) {
	term := newTerminal(t)
	binaries(t)
	dir := t.TempDir()
	big, copied := filepath.Join(dir, "big.db"), filepath.Join(dir, "new.db")
	const events = 2500
	bigStore(t, big, events)
	copyLine := fmt.Sprintf("%s copy --from sqlite://%s --to sqlite://%s; echo exit=$?", bin.cairn, big, copied)
	prompt := regexp.MustCompile(`(?m)^Go ahead\? \[y/N\] ?$`)

	t.Run("no", func(t *testing.T) {
		term.clear()
		term.typeLine(copyLine)
		s := term.waitFor(prompt)
		assert.Contains(t, s, fmt.Sprintf("copy %d events\n  from sqlite://%s\n  to   sqlite://%s\n", events, big, copied), "the plan, above the prompt")
		term.typeLine("n")
		s = term.waitFor(regexp.MustCompile(`(?m)^exit=\d+$`))
		assert.Contains(t, s, "Go ahead? [y/N] n\ncairn: not confirmed: nothing was changed\nexit=4\n")
		assert.NoFileExists(t, copied, "nothing was made: the copy creates its target only once confirmed")
	})

	t.Run("yes", func(t *testing.T) {
		term.clear()
		term.typeLine(copyLine)
		term.waitFor(prompt)
		term.typeLine("y")
		// A frame with the bar part-way: percentage, the bar, done/total,
		// the rate and [elapsed:left], on the line below the answer.
		partial := regexp.MustCompile(`(?m)^Go ahead\? \[y/N\] y\ncopy +([1-9]|[1-9]\d)% \|█+ +\| \((\d+)/` +
			fmt.Sprint(events) + `, \d+ events/s\) \[\d+s:\d+s\] *$`)
		s := term.waitFor(partial)
		t.Logf("a frame of the copy:\n%s", s)
		// One line, redrawn in place: no earlier frame left above it.
		assert.Len(t, regexp.MustCompile(`(?m)^copy +\d+% \|`).FindAllString(s, -1), 1, "one bar on the screen:\n%s", s)

		s = term.waitFor(regexp.MustCompile(`(?m)^exit=\d+$`))
		assert.Regexp(t, `(?m)^copy 100% \|█{30}\| \(2500/2500, \d+ events/s\) *\nFROM `, s, "the finished bar, then the report on a line of its own")
		assert.Regexp(t, `(?m)^COPIED +2500$`, s)
		assert.Contains(t, s, "2500 events, 0 differ")
		assert.Contains(t, s, "\nexit=0\n")
		assert.Equal(t, int64(events), eventsIn(t, copied))
	})

	t.Run("reset", func(t *testing.T) {
		ctx := context.Background()
		s, err := sqlite.Open(ctx, big, sqlite.Options{})
		require.NoError(t, err)
		var tenth eventstore.Position
		for e, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
			require.NoError(t, err)
			if tenth = e.Position; e.Version == 0 && e.StreamID == "order-9" {
				break
			}
		}
		require.NoError(t, s.SaveCheckpoint(ctx, "orders-view", eventstore.Start, tenth, 0))
		require.NoError(t, s.Close())

		term.clear()
		term.typeLine(fmt.Sprintf("%s --store sqlite://%s projections reset orders-view --to-start; echo exit=$?", bin.cairn, big))
		screen := term.waitFor(prompt)
		assert.Contains(t, screen, fmt.Sprintf("Reset consumer orders-view's checkpoint from %s to the start", tenth))
		term.typeLine("y")
		screen = term.waitFor(regexp.MustCompile(`(?m)^exit=\d+$`))
		assert.Contains(t, screen, fmt.Sprintf("Go ahead? [y/N] y\nconsumer orders-view: checkpoint moved from %s to the start\nexit=0\n", tenth))

		s, err = sqlite.Open(ctx, big, sqlite.Options{ReadOnly: true})
		require.NoError(t, err)
		defer s.Close()
		cp, err := s.Checkpoint(ctx, "orders-view")
		require.NoError(t, err)
		assert.Equal(t, eventstore.Start, cp.Position, "the checkpoint is at the start")
	})
}
