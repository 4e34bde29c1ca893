package commandtest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/retry"
)

func rejectionTests(o Options) []test {
	return []test{
		{"RecordedRejectionIsFinal", testRecordedRejectionIsFinal},
		{"RecordedRejectionBelowSnapshot", testRecordedRejectionBelowSnapshot},
		{"ApplyNeverSeesRecordedRejections", testApplyNeverSeesRecordedRejections},
		{"OneOutcomeUnderContention", func(t *testing.T, e *env) { testOneOutcomeUnderContention(t, e, o.OutcomeRounds, true) }},
	}
}

// requireRecordedRejection checks that a dispatch returned the recorded
// rejection of msg at version, with the reason text of the first one, and
// appended nothing.
func requireRecordedRejection(t *testing.T, res command.Result, err error, msg command.Message, version uint64, reason, what string) {
	t.Helper()
	var rr *command.RecordedRejectionError
	require.ErrorAs(t, err, &rr, what)
	assert.ErrorIs(t, err, command.ErrRecordedRejection, what)
	assert.Equal(t, reason, err.Error(), "%s: the text of the first rejection", what)
	assert.Equal(t, command.RecordedRejectionError{CommandID: msg.ID, Stream: res.Stream, Version: version,
		Command: fmt.Sprintf("%T", msg.Command), Reason: reason}, *rr, what)
	assert.True(t, res.Rejected, "%s: the result says rejected", what)
	assert.True(t, res.Duplicate, "%s: the result says nothing was appended", what)
	assert.Equal(t, version, res.Version, "%s: the version of the recorded rejection", what)
	assert.Empty(t, res.Events, what)
}

// testRecordedRejectionIsFinal rejects a command with RecordRejection, then
// changes the aggregate so that the command would succeed: a re-send of its
// ID, to the same bus, to a cold one, and even without RecordRejection,
// returns the same rejection and appends nothing.
func testRecordedRejectionIsFinal(t *testing.T, e *env) {
	ctx := context.Background()
	b := e.bus(command.Options{}, 0)
	id := e.id("final")
	stream := "counter-" + id
	msg := command.Message{ID: "at-1", CorrelationID: "flow-1", Command: IncrementAt{ID: id, At: 1}, RecordRejection: true}

	first, err := b.Dispatch(ctx, msg)
	require.ErrorIs(t, err, ErrWrongCount, "the first dispatch returns the aggregate's own error")
	reason := err.Error()
	assert.True(t, first.Rejected)
	assert.False(t, first.Duplicate, "the first dispatch recorded the rejection")
	assert.Equal(t, uint64(0), first.Version, "the version of the recorded rejection")
	evs := e.events(id)
	require.Len(t, evs, 1, "one recorded rejection")
	rec := evs[0]
	assert.Equal(t, aggregate.RejectionType, rec.Type)
	assert.Equal(t, uint32(aggregate.RejectionSchemaVersion), rec.SchemaVersion)
	assert.Equal(t, aggregate.EventID(stream, msg.ID, 0), rec.ID, "its ID derives from the command ID, as a command's first event's")
	assert.Equal(t, msg.ID, rec.Metadata.CommandID)
	assert.Equal(t, "flow-1", rec.Metadata.CorrelationID)
	assert.Equal(t, rec.Position, first.Position, "the position of the recorded rejection")
	want, err := json.Marshal(map[string]string{"reason": reason, "command": "commandtest.IncrementAt"})
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(rec.Data))

	// The aggregate moves on: decided now, the command would succeed.
	_, err = b.Dispatch(ctx, command.Message{ID: "inc", Command: Increment{ID: id}})
	require.NoError(t, err)
	cold := e.bus(command.Options{NoCache: true}, 0)
	for _, c := range []struct {
		what   string
		bus    *command.Bus
		record bool
	}{{"same bus", b, true}, {"cold bus", cold, true}, {"without RecordRejection", cold, false}} {
		m := msg
		m.RecordRejection = c.record
		again, err := c.bus.Dispatch(ctx, m)
		requireRecordedRejection(t, again, err, msg, 0, reason, c.what)
		assert.Equal(t, 1, again.Attempts, "%s: found without deciding", c.what)
		assert.Equal(t, rec.Position, again.Position, "%s", c.what)
	}
	assert.Len(t, e.events(id), 2, "no re-send appended anything")
	assert.Equal(t, 1, e.load(id).Count)

	res, err := b.Dispatch(ctx, command.Message{ID: "at-1-new", Command: IncrementAt{ID: id, At: 1}, RecordRejection: true})
	require.NoError(t, err, "under a new ID the same command is decided on today's state")
	assert.Equal(t, uint64(2), res.Version)
	assert.Equal(t, 2, e.load(id).Count)
}

// testRecordedRejectionBelowSnapshot re-sends a command whose recorded
// rejection lies below the snapshot a cold bus loads from, on a store with
// a command index, without one, and without one with a scan limit that
// cannot reach it: the bus finds the rejection (through the index, by
// scanning, or when the store refuses the re-decided success, whose first
// event ID is the rejection's) and appends nothing.
func testRecordedRejectionBelowSnapshot(t *testing.T, e *env) {
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		store eventstore.Store
		scan  int
	}{
		{"CommandIndex", e.store, 0},
		{"Scan", struct{ eventstore.Store }{e.store}, 0},
		{"BeyondScanLimit", struct{ eventstore.Store }{e.store}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := e.id("below" + c.name)
			warm := e.busOn(c.store, command.Options{}, 5)
			msg := command.Message{ID: "at-20", Command: IncrementAt{ID: id, At: 20}, RecordRejection: true}
			_, err := warm.Dispatch(ctx, msg)
			require.ErrorIs(t, err, ErrWrongCount)
			reason := err.Error()
			e.increments(warm, id, 20)
			snap, ok := e.snapshot(id)
			require.True(t, ok, "21 events with SnapshotEvery 5 must leave a snapshot")
			require.Greater(t, snap.Version, uint64(c.scan), "the rejection must lie below the snapshot, further than the scan limit")

			cold := e.busOn(c.store, command.Options{NoCache: true, ScanLimit: c.scan}, 5)
			again, err := cold.Dispatch(ctx, msg)
			requireRecordedRejection(t, again, err, msg, 0, reason, c.name)
			assert.Len(t, e.events(id), 21, "nothing appended")
			assert.Equal(t, 20, e.load(id).Count)
		})
	}
}

// testApplyNeverSeesRecordedRejections interleaves increments and recorded
// rejections, with a snapshot every 2 events, so that snapshots are taken
// at rejections: Counter's Apply refuses events it does not know, and
// counts those it applies, so a replay, a load from the snapshot, the cached
// instance and a cold bus agree only if no rejection reached it.
func testApplyNeverSeesRecordedRejections(t *testing.T, e *env) {
	ctx := context.Background()
	id := e.id("apply")
	b := e.bus(command.Options{}, 2)
	for i := range 2 {
		e.increments(b, id, 1)
		_, err := b.Dispatch(ctx, command.Message{ID: fmt.Sprint("rej-", i), Command: Reject{ID: id}, RecordRejection: true})
		require.ErrorIs(t, err, ErrRejected)
	}
	e.increments(b, id, 1)
	evs := e.events(id)
	require.Len(t, evs, 5)
	for _, v := range []int{1, 3} {
		assert.Equal(t, aggregate.RejectionType, evs[v].Type, "event %d", v)
	}
	snap, ok := e.snapshot(id)
	require.True(t, ok)
	assert.Equal(t, uint64(3), snap.Version, "the snapshot was taken at a recorded rejection")

	want := Counter{ID: id, Count: 3, Applied: 3}
	assert.Equal(t, want, *e.load(id), "a full replay applies the three increments and nothing else")
	assert.Equal(t, want, *e.loadVia(id), "a load from the snapshot agrees")
	for what, bus := range map[string]*command.Bus{"cached": b, "cold": e.bus(command.Options{NoCache: true}, 2)} {
		res, err := bus.Dispatch(ctx, command.Message{ID: "check-" + what, Command: CheckCount{ID: id, Want: 3}})
		require.NoError(t, err, "the %s instance decides on the same state", what)
		assert.Equal(t, uint64(4), res.Version, what)
		again, err := bus.Dispatch(ctx, command.Message{ID: "rej-0", Command: Reject{ID: id}})
		requireRecordedRejection(t, again, err, command.Message{ID: "rej-0", Command: Reject{ID: id}}, 1, ErrRejected.Error(), what)
	}
}

// testOneOutcomeUnderContention dispatches one command ID from several
// goroutines through three buses (three processes) while another goroutine
// changes the aggregate, so that the command is refused when decided
// before the change and accepted after it: every dispatch of the ID must
// report one outcome, all the same rejection or all the same events, and
// the stream must hold that outcome once. Without recorded rejections
// (record false) a round where one dispatch decided before the change and
// another after reports both.
func testOneOutcomeUnderContention(t *testing.T, e *env, rounds int, record bool) {
	ctx := context.Background()
	opts := command.Options{Retry: retry.Policy{Initial: 20 * time.Microsecond, Max: time.Millisecond}}
	buses := []*command.Bus{e.bus(opts, 0), e.bus(opts, 0), e.bus(opts, 0)}
	const dispatchers = 4
	type answer struct {
		res command.Result
		err error
	}
	rejected := 0
	for round := range rounds {
		id := e.id(fmt.Sprint("once", round))
		msg := command.Message{ID: "once", Command: IncrementAt{ID: id, At: 1}, RecordRejection: record}
		answers := make([]answer, dispatchers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for w := range dispatchers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res, _, err := dispatchUntilDone(ctx, buses[w%len(buses)], msg)
				answers[w] = answer{res, err}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, _, err := dispatchUntilDone(ctx, buses[round%len(buses)], command.Message{ID: "change", Command: Increment{ID: id}})
			assert.NoError(t, err)
		}()
		close(start)
		wg.Wait()

		first := answers[0]
		if first.err != nil {
			rejected++
		}
		decided := 0
		for w, a := range answers {
			if !a.res.Duplicate {
				decided++
			}
			if first.err == nil {
				require.NoError(t, a.err, "round %d: dispatch %d was refused, dispatch 0 succeeded: two outcomes for one command ID", round, w)
				assert.Equal(t, first.res.Version, a.res.Version, "round %d, dispatch %d", round, w)
				assert.Equal(t, first.res.Events, a.res.Events, "round %d, dispatch %d", round, w)
				continue
			}
			require.Error(t, a.err, "round %d: dispatch %d succeeded, dispatch 0 was refused (%v): two outcomes for one command ID", round, w, first.err)
			require.True(t, a.res.Rejected, "round %d, dispatch %d: a rejection, not a failure: %v", round, w, a.err)
			assert.Equal(t, first.err.Error(), a.err.Error(), "round %d, dispatch %d: the same reason", round, w)
			assert.Equal(t, first.res.Version, a.res.Version, "round %d, dispatch %d", round, w)
		}
		assert.Equal(t, 1, decided, "round %d: one dispatch decided, the others found its outcome", round)
		ofCommand := 0
		for _, ev := range e.events(id) {
			if ev.Metadata.CommandID == msg.ID {
				ofCommand++
				assert.Equal(t, first.err != nil, ev.Type == aggregate.RejectionType, "round %d: the stream holds the outcome reported", round)
			}
		}
		require.Equal(t, 1, ofCommand, "round %d: the command's outcome is in the stream once", round)
	}
	t.Logf("%d rounds: %d ended rejected, %d accepted", rounds, rejected, rounds-rejected)
}
