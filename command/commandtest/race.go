package commandtest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/internal/check"
)

// testRacingDuplicate races two dispatches of one command ID through two
// buses on one store (two processes, or a redelivery while the first append
// is in flight), with a Handle that decides differently each time. Both
// load the same version and decide before either appends, so the loser's
// append repeats the winner's event IDs (they derive from the command ID)
// at the same place, and the store reports it as a duplicate. The loser
// never appended its own decision: what it returns, and the state it caches
// for the next command, must be what the store holds.
func testRacingDuplicate(t testing.TB, e *env) {
	ctx := context.Background()
	winnerBus, loserBus := e.bus(command.Options{}, 0), e.bus(command.Options{}, 0)
	id := e.id("race")
	for i, b := range []*command.Bus{winnerBus, loserBus} {
		_, err := b.Dispatch(ctx, command.Message{ID: fmt.Sprint("warm-", i), Command: Increment{ID: id}})
		check.NoError(t, err, "both buses cache the counter")
	}

	// The barrier: each side waits in Handle, after deciding, until the
	// other has decided (or has ended without deciding); the loser then
	// waits until the winner's dispatch is over, so that the winner appends
	// first, whatever the scheduler does.
	winner, loser := newRacer(), newRacer()
	go winner.run(ctx, winnerBus, id, loser, nil)
	go loser.run(ctx, loserBus, id, winner, winner.done)
	<-winner.done
	<-loser.done
	check.NoError(t, winner.err)
	check.NoError(t, loser.err)
	winnerRes, loserRes := winner.res, loser.res

	evs := e.events(id)
	check.Len(t, evs, 3, "the loser's append writes nothing")
	stored := e.load(id).Token
	check.True(t, len(stored) > 0)
	want := []any{Stamped{Token: stored}}
	check.True(t, !winnerRes.Duplicate, "the winner appended")
	check.True(t, loserRes.Duplicate, "the loser's append repeated the winner's")
	for _, r := range []struct {
		name string
		res  command.Result
	}{{"winner", winnerRes}, {"loser", loserRes}} {
		check.Equal(t, r.res.Events, want, "the %s reports the stored events", r.name)
		check.Equal(t, r.res.Version, evs[2].Version, "the %s reports the stored version", r.name)
	}

	// Each bus decides its next command from the state it cached: the one
	// the store holds, which every replay builds.
	for i, b := range []*command.Bus{loserBus, winnerBus} {
		echo, err := b.Dispatch(ctx, command.Message{ID: fmt.Sprint("m-2-", i), Command: Echo{ID: id}})
		check.NoError(t, err)
		check.Equal(t, echo.Events, []any{Echoed{Token: stored}}, "bus %d echoes the stored token", i)
	}
	check.Equal(t, e.load(id).Token, stored)
}

// racer is one side of testRacingDuplicate: a dispatch of Stamp "m-1".
type racer struct {
	decided, done chan struct{}
	once          sync.Once
	res           command.Result
	err           error
}

func newRacer() *racer { return &racer{decided: make(chan struct{}), done: make(chan struct{})} }

// run dispatches on b. After deciding, Handle waits until rival has decided
// or is done, and then until thenFor (when not nil) is closed.
func (r *racer) run(ctx context.Context, b *command.Bus, id string, rival *racer, thenFor <-chan struct{}) {
	defer close(r.done)
	r.res, r.err = b.Dispatch(ctx, command.Message{ID: "m-1", Command: Stamp{ID: id, Decided: func() {
		r.once.Do(func() { close(r.decided) })
		select {
		case <-rival.decided:
		case <-rival.done:
		}
		if thenFor != nil {
			<-thenFor
		}
	}}})
}
