package cli

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"golang.org/x/term"
)

// confirm says what a command is about to change and goes on when --yes
// was given or the person at the terminal answers yes. Off a terminal,
// without --yes, it changes nothing and returns [ErrNotConfirmed]: a script
// must say --yes, so that no pipe ever answers for it.
func (a *app) confirm(plan string) error {
	fmt.Fprintf(a.stderr, "%s\n", plan)
	if a.yes {
		return nil
	}
	if !a.interactive() {
		return fmt.Errorf("%w: not on a terminal; run again with --yes to make the change", ErrNotConfirmed)
	}
	fmt.Fprint(a.stderr, "Go ahead? [y/N] ")
	answer, _ := bufio.NewReader(a.stdin).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return nil
	}
	return fmt.Errorf("%w: nothing was changed", ErrNotConfirmed)
}

// interactive reports whether a person can answer: stdin is a terminal.
func (a *app) interactive() bool {
	f, ok := a.stdin.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// stderrIsTerminal reports whether progress can be drawn in place.
func (a *app) stderrIsTerminal() bool {
	f, ok := a.stderr.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
