package commandtest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/command"
)

// testRacingDuplicate races two dispatches of one command ID through two
// buses on one store (two processes, or a redelivery while the first append
// is in flight), with a Handle that decides differently each time. Both
// load the same version and decide before either appends, so the loser's
// append repeats the winner's event IDs (they derive from the command ID)
// at the same place, and the store reports it as a duplicate. The loser
// never appended its own decision: what it returns, and the state it caches
// for the next command, must be what the store holds.
func testRacingDuplicate(t *testing.T, e *env) {
	ctx := context.Background()
	winner, loser := e.bus(command.Options{}, 0), e.bus(command.Options{}, 0)
	id := e.id("race")
	for i, b := range []*command.Bus{winner, loser} {
		_, err := b.Dispatch(ctx, command.Message{ID: fmt.Sprint("warm-", i), Command: Increment{ID: id}})
		require.NoError(t, err, "both buses cache the counter")
	}

	// The barrier: each side waits in Handle, after deciding, until the
	// other has decided (or has ended without deciding); the loser then
	// waits until the winner's dispatch is over, so that the winner appends
	// first, whatever the scheduler does.
	winnerDecided, loserDecided := make(chan struct{}), make(chan struct{})
	winnerDone, loserDone := make(chan struct{}), make(chan struct{})
	var winnerOnce, loserOnce sync.Once
	var winnerRes, loserRes command.Result
	var winnerErr, loserErr error
	go func() {
		defer close(winnerDone)
		winnerRes, winnerErr = winner.Dispatch(ctx, command.Message{ID: "m-1", Command: Stamp{ID: id, Decided: func() {
			winnerOnce.Do(func() { close(winnerDecided) })
			select {
			case <-loserDecided:
			case <-loserDone:
			}
		}}})
	}()
	go func() {
		defer close(loserDone)
		loserRes, loserErr = loser.Dispatch(ctx, command.Message{ID: "m-1", Command: Stamp{ID: id, Decided: func() {
			loserOnce.Do(func() { close(loserDecided) })
			select {
			case <-winnerDecided:
			case <-winnerDone:
			}
			<-winnerDone
		}}})
	}()
	<-winnerDone
	<-loserDone
	require.NoError(t, winnerErr)
	require.NoError(t, loserErr)

	evs := e.events(id)
	require.Len(t, evs, 3, "the loser's append writes nothing")
	stored := e.load(id).Token
	require.NotEmpty(t, stored)
	want := []any{Stamped{Token: stored}}
	assert.False(t, winnerRes.Duplicate, "the winner appended")
	assert.True(t, loserRes.Duplicate, "the loser's append repeated the winner's")
	for _, r := range []struct {
		name string
		res  command.Result
	}{{"winner", winnerRes}, {"loser", loserRes}} {
		assert.Equal(t, want, r.res.Events, "the %s reports the stored events", r.name)
		assert.Equal(t, evs[2].Version, r.res.Version, "the %s reports the stored version", r.name)
	}

	// Each bus decides its next command from the state it cached: the one
	// the store holds, which every replay builds.
	for i, b := range []*command.Bus{loser, winner} {
		echo, err := b.Dispatch(ctx, command.Message{ID: fmt.Sprint("m-2-", i), Command: Echo{ID: id}})
		require.NoError(t, err)
		assert.Equal(t, []any{Echoed{Token: stored}}, echo.Events, "bus %d echoes the stored token", i)
	}
	assert.Equal(t, stored, e.load(id).Token)
}
