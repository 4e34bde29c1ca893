package commandtest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/busrepo"
	"github.com/cairn-es/cairn/internal/check"
	"github.com/cairn-es/cairn/retry"
)

func rejectionTests(o Options) []test {
	return []test{
		{"RecordedRejectionIsFinal", testRecordedRejectionIsFinal},
		{"RecordedRejectionBelowSnapshot", testRecordedRejectionBelowSnapshot},
		{"ApplyNeverSeesRecordedRejections", testApplyNeverSeesRecordedRejections},
		{"OneOutcomeUnderContention", func(t testing.TB, e *env) { testOneOutcomeUnderContention(t, e, o.OutcomeRounds, true) }},
	}
}

// requireRecordedRejection checks that a dispatch returned the recorded
// rejection of msg at version, with the reason text of the first one, and
// appended nothing.
func requireRecordedRejection(t testing.TB, res command.Result, err error, msg command.Message, version uint64, reason, what string) {
	t.Helper()
	var rr *command.RecordedRejectionError
	check.ErrorAs(t, err, &rr, what)
	check.ErrorIs(t, err, command.ErrRecordedRejection, what)
	check.Equal(t, err.Error(), reason, "%s: the text of the first rejection", what)
	check.Equal(t, *rr, command.RecordedRejectionError{CommandID: msg.ID, Stream: res.Stream, Version: version,
		Command: fmt.Sprintf("%T", msg.Command), Reason: reason}, what)
	check.True(t, res.Rejected, "%s: the result says rejected", what)
	check.True(t, res.Duplicate, "%s: the result says nothing was appended", what)
	check.Equal(t, res.Version, version, "%s: the version of the recorded rejection", what)
	check.Len(t, res.Events, 0, what)
}

// testRecordedRejectionIsFinal rejects a command with RecordRejection, then
// changes the aggregate so that the command would succeed: a re-send of its
// ID, to the same bus, to a cold one, and even without RecordRejection,
// returns the same rejection and appends nothing.
func testRecordedRejectionIsFinal(t testing.TB, e *env) {
	ctx := context.Background()
	b := e.bus(command.Options{}, 0)
	id := e.id("final")
	stream := "counter-" + id
	msg := command.Message{ID: "at-1", CorrelationID: "flow-1", Command: IncrementAt{ID: id, At: 1}, RecordRejection: true}

	first, err := b.Dispatch(ctx, msg)
	check.ErrorIs(t, err, ErrWrongCount, "the first dispatch returns the aggregate's own error")
	reason := err.Error()
	check.True(t, first.Rejected)
	check.True(t, !first.Duplicate, "the first dispatch recorded the rejection")
	check.Equal(t, first.Version, uint64(0), "the version of the recorded rejection")
	evs := e.events(id)
	check.Len(t, evs, 1, "one recorded rejection")
	rec := evs[0]
	check.Equal(t, rec.Type, busrepo.RejectionType)
	check.Equal(t, rec.SchemaVersion, uint32(busrepo.RejectionSchemaVersion))
	check.Equal(t, rec.ID, storekit.CommandEventID(stream, msg.ID, 0), "its ID derives from the command ID, as a command's first event's")
	check.Equal(t, rec.Metadata.CommandID, msg.ID)
	check.Equal(t, rec.Metadata.CorrelationID, "flow-1")
	check.Equal(t, first.Position, rec.Position, "the position of the recorded rejection")
	want, err := json.Marshal(map[string]string{"reason": reason, "command": "commandtest.IncrementAt"})
	check.NoError(t, err)
	var gotData, wantData any
	check.NoError(t, json.Unmarshal(rec.Data, &gotData), "the rejection's data %s", rec.Data)
	check.NoError(t, json.Unmarshal(want, &wantData))
	check.Equal(t, gotData, wantData, "the rejection's data")

	// The aggregate moves on: decided now, the command would succeed.
	_, err = b.Dispatch(ctx, command.Message{ID: "inc", Command: Increment{ID: id}})
	check.NoError(t, err)
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
		check.Equal(t, again.Attempts, 1, "%s: found without deciding", c.what)
		check.Equal(t, again.Position, rec.Position, "%s", c.what)
	}
	check.Len(t, e.events(id), 2, "no re-send appended anything")
	check.Equal(t, e.load(id).Count, 1)

	res, err := b.Dispatch(ctx, command.Message{ID: "at-1-new", Command: IncrementAt{ID: id, At: 1}, RecordRejection: true})
	check.NoError(t, err, "under a new ID the same command is decided on today's state")
	check.Equal(t, res.Version, uint64(2))
	check.Equal(t, e.load(id).Count, 2)
}

// testRecordedRejectionBelowSnapshot re-sends a command whose recorded
// rejection lies below the snapshot a cold bus loads from, on a store with
// a command index and without one: the instance does not remember it, so
// the bus decides it again, and finds the rejection when the store refuses
// the re-decided success (its first event ID is the rejection's), through
// the index or by scanning; it appends nothing.
func testRecordedRejectionBelowSnapshot(t testing.TB, e *env) {
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		store eventstore.Store
	}{
		{"CommandIndex", e.store},
		{"Scan", struct{ eventstore.Store }{e.store}},
	} {
		check.Run(t, c.name, func(t testing.TB) {
			id := e.id("below" + c.name)
			warm := e.busOn(c.store, command.Options{}, 5)
			msg := command.Message{ID: "at-20", Command: IncrementAt{ID: id, At: 20}, RecordRejection: true}
			_, err := warm.Dispatch(ctx, msg)
			check.ErrorIs(t, err, ErrWrongCount)
			reason := err.Error()
			e.increments(warm, id, 20)
			_, ok := e.snapshot(id)
			check.True(t, ok, "21 events with SnapshotEvery 5 must leave a snapshot")

			cold := e.busOn(c.store, command.Options{NoCache: true}, 5)
			again, err := cold.Dispatch(ctx, msg)
			requireRecordedRejection(t, again, err, msg, 0, reason, c.name)
			check.Len(t, e.events(id), 21, "nothing appended")
			check.Equal(t, e.load(id).Count, 20)
		})
	}
}

// testApplyNeverSeesRecordedRejections interleaves increments and recorded
// rejections, with a snapshot every 2 events, so that snapshots are taken
// at rejections: Counter's Apply refuses events it does not know, and
// counts those it applies, so a replay, a load from the snapshot, the cached
// instance and a cold bus agree only if no rejection reached it.
func testApplyNeverSeesRecordedRejections(t testing.TB, e *env) {
	ctx := context.Background()
	id := e.id("apply")
	b := e.bus(command.Options{}, 2)
	for i := range 2 {
		e.increments(b, id, 1)
		_, err := b.Dispatch(ctx, command.Message{ID: fmt.Sprint("rej-", i), Command: Reject{ID: id}, RecordRejection: true})
		check.ErrorIs(t, err, ErrRejected)
	}
	e.increments(b, id, 1)
	evs := e.events(id)
	check.Len(t, evs, 5)
	for _, v := range []int{1, 3} {
		check.Equal(t, evs[v].Type, busrepo.RejectionType, "event %d", v)
	}
	snap, ok := e.snapshot(id)
	check.True(t, ok)
	check.Equal(t, snap.Version, uint64(3), "the snapshot was taken at a recorded rejection")

	want := Counter{ID: id, Count: 3, Applied: 3}
	check.Equal(t, *e.load(id), want, "a full replay applies the three increments and nothing else")
	check.Equal(t, *e.loadVia(id), want, "a load from the snapshot agrees")
	for what, bus := range map[string]*command.Bus{"cached": b, "cold": e.bus(command.Options{NoCache: true}, 2)} {
		res, err := bus.Dispatch(ctx, command.Message{ID: "check-" + what, Command: CheckCount{ID: id, Want: 3}})
		check.NoError(t, err, "the %s instance decides on the same state", what)
		check.Equal(t, res.Version, uint64(4), what)
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
func testOneOutcomeUnderContention(t testing.TB, e *env, rounds int, record bool) {
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
			if err != nil {
				t.Errorf("round %d: dispatch the change: %v", round, err)
			}
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
				check.NoError(t, a.err, "round %d: dispatch %d was refused, dispatch 0 succeeded: two outcomes for one command ID", round, w)
				check.Equal(t, a.res.Version, first.res.Version, "round %d, dispatch %d", round, w)
				check.Equal(t, a.res.Events, first.res.Events, "round %d, dispatch %d", round, w)
				continue
			}
			check.True(t, a.err != nil, "round %d: dispatch %d succeeded, dispatch 0 was refused (%v): two outcomes for one command ID", round, w, first.err)
			check.True(t, a.res.Rejected, "round %d, dispatch %d: a rejection, not a failure: %v", round, w, a.err)
			check.Equal(t, a.err.Error(), first.err.Error(), "round %d, dispatch %d: the same reason", round, w)
			check.Equal(t, a.res.Version, first.res.Version, "round %d, dispatch %d", round, w)
		}
		check.Equal(t, decided, 1, "round %d: one dispatch decided, the others found its outcome", round)
		ofCommand := 0
		for _, ev := range e.events(id) {
			if ev.Metadata.CommandID == msg.ID {
				ofCommand++
				check.Equal(t, ev.Type == busrepo.RejectionType, first.err != nil, "round %d: the stream holds the outcome reported", round)
			}
		}
		check.Equal(t, ofCommand, 1, "round %d: the command's outcome is in the stream once", round)
	}
	t.Logf("%d rounds: %d ended rejected, %d accepted", rounds, rejected, rounds-rejected)
}
