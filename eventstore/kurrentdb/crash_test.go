package kurrentdb_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/kurrentdb/internal/testserver"
)

// crashChildEnv switches the test binary into the dispatcher that
// TestKilledDispatcherLosesAndDoublesNothing kills; its value is the
// server's URL.
const crashChildEnv = "CAIRN_KURRENTDB_CRASH_CHILD"

// crashCommands is how many commands each run of the child sends, from the
// first: a child killed half-way is followed by one that sends them all
// again, as a queue redelivers what was never acknowledged.
const crashCommands = 300

// Add adds one to a tally; Added records it.
type (
	Add   struct{ Tally, Command string }
	Added struct{ Command string }
	Tally struct{ N int }
)

// AggregateID implements command.Command.
func (c Add) AggregateID() string { return c.Tally }

func (t *Tally) add(_ context.Context, c Add) ([]any, error) {
	return []any{Added{Command: c.Command}}, nil
}
func (t *Tally) added(Added) { t.N++ }

var tallies = func() *aggregate.Type[Tally, *Tally] {
	t, err := aggregate.NewType[Tally]("tally", aggregate.Options[Tally]{},
		aggregate.Handles((*Tally).add), aggregate.Applies((*Tally).added))
	if err != nil {
		panic(err)
	}
	return t
}()

// TestKilledDispatcherLosesAndDoublesNothing SIGKILLs a process that
// dispatches commands through the bus to a KurrentDB, at random moments
// (mid-append, mid-read-back, mid-look-up), then lets a new process send
// every command again, and checks that each command took effect exactly
// once: the store's repeat check absorbs what the killed process wrote
// without hearing the reply.
func TestKilledDispatcherLosesAndDoublesNothing(t *testing.T) {
	if url := os.Getenv(crashChildEnv); url != "" {
		dispatchAll(t, url)
		return
	}
	if testing.Short() {
		t.Skip("kills child processes")
	}
	srv := testserver.New(t)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	for round := range 8 {
		cmd := child(t, srv.URL())
		require.NoError(t, cmd.Start())
		time.Sleep(time.Duration(50+rng.IntN(400)) * time.Millisecond)
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		t.Logf("round %d: child killed", round)
	}
	out, err := child(t, srv.URL()).CombinedOutput()
	require.NoError(t, err, "the last child sends every command to the end:\n%s", out)

	s := open(t, srv.URL())
	seen := make(map[string]int)
	for e, err := range s.ReadAll(context.Background(), eventstore.Start, eventstore.Filter{StreamPrefixes: []string{"tally-"}}) {
		require.NoError(t, err)
		seen[e.Metadata.CommandID]++
	}
	require.Len(t, seen, crashCommands, "every command took effect")
	for id, n := range seen {
		assert.Equal(t, 1, n, "command %s took effect %d times", id, n)
	}
}

// child is the test binary re-run as the dispatcher.
func child(t *testing.T, url string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledDispatcherLosesAndDoublesNothing$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+url)
	return cmd
}

// dispatchAll sends every command, four at a time, each until the bus
// accepts it.
func dispatchAll(t *testing.T, url string) {
	ctx := context.Background()
	s := open(t, url)
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, errors.Join(codec.Register[Added](reg, "tally.added", 1)))
	bus := command.New(s, reg, command.Options{})
	require.NoError(t, command.Route[Add](bus, tallies))
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < crashCommands; i += 4 {
				id := "cmd-" + strconv.Itoa(i)
				msg := command.Message{ID: id, Command: Add{Tally: fmt.Sprintf("%d", i%7), Command: id}}
				for {
					_, err := bus.Dispatch(ctx, msg)
					if err == nil {
						break
					}
					if !errors.Is(err, eventstore.ErrUnavailable) {
						errs <- fmt.Errorf("%s: %w", id, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
