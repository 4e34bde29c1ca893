package storetest

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/oklog/ulid/v2"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/check"
)

// The bad-input tables of the consumer stores: leases, dead letters,
// snapshots, checkpoints and command lookups. Each case names its input
// and the error it must get, the same in kind on every store, and checks
// that nothing was written.

func testLeaseBadTable(t testing.TB, s storekit.LeaseStore) {
	ctx := context.Background()
	name := consumerName(t, "lease")
	long := strings.Repeat("h", storekit.MaxStreamLen+1)
	for _, c := range []struct {
		what, holder string
		ttl          time.Duration
		field        string
	}{
		{"TTL of 250 years", "A", 250 * 365 * 24 * time.Hour, "lease TTL"},
		{"largest TTL", "A", math.MaxInt64, "lease TTL"},
		{"TTL just above the maximum", "A", storekit.MaxLeaseTTL + 1, "lease TTL"},
		{"NUL byte in holder", "A\x00", time.Minute, "lease holder"},
		{"invalid UTF-8 holder", "A\xff", time.Minute, "lease holder"},
		{"overlong holder", long, time.Minute, "lease holder"},
	} {
		_, _, err := s.AcquireLease(ctx, name, c.holder, c.ttl)
		check.Invalid(t, err, c.field, "acquire: "+c.what)
		_, err = s.RenewLease(ctx, storekit.Lease{Name: name, Holder: c.holder, Fence: 1}, c.ttl)
		check.Invalid(t, err, c.field, "renew: "+c.what)
	}
	// Nothing was taken: another holder gets the lease at once.
	_, ok := mustAcquire(t, s, name, "B", time.Minute)
	check.True(t, ok, "a refused acquire took the lease")

	// A granted lease cannot be stretched past the maximum either, and the
	// refused renewal leaves it as it was.
	l, ok := mustAcquire(t, s, consumerName(t, "renew"), "A", time.Minute)
	check.True(t, ok)
	_, err := s.RenewLease(ctx, l, math.MaxInt64)
	check.Invalid(t, err, "lease TTL", "renew for the largest TTL")
	_, ok = mustAcquire(t, s, l.Name, "B", time.Minute)
	check.True(t, !ok, "the refused renewal released the lease")
	check.Less(t, time.Until(l.Expires), 2*time.Minute, "expires %s", l.Expires)

	for _, c := range []struct {
		what  string
		l     storekit.Lease
		field string
	}{
		{"zero lease", storekit.Lease{}, "consumer name"},
		{"NUL byte in name", storekit.Lease{Name: "a\x00", Holder: "A", Fence: 1}, "consumer name"},
		{"empty holder", storekit.Lease{Name: l.Name, Fence: l.Fence}, "lease holder"},
		{"NUL byte in holder", storekit.Lease{Name: l.Name, Holder: "A\x00", Fence: l.Fence}, "lease holder"},
		{"invalid UTF-8 holder", storekit.Lease{Name: l.Name, Holder: "A\xff", Fence: l.Fence}, "lease holder"},
	} {
		check.Invalid(t, s.ReleaseLease(ctx, c.l), c.field, "release: "+c.what)
	}
	_, ok = mustAcquire(t, s, l.Name, "B", time.Minute)
	check.True(t, !ok, "a refused release released the lease")
}

func testDeadLetterBadTable(t testing.TB, s storekit.DeadLetterStore) {
	ctx, name := context.Background(), consumerName(t, "badtable")
	year := func(y int) time.Time { return time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC) }
	for _, c := range []struct {
		what   string
		mutate func(*eventstore.DeadLetter)
		field  string
	}{
		{"part 2^31", func(d *eventstore.DeadLetter) { d.Part = 1 << 31 }, "dead letter part"},
		{"negative attempts", func(d *eventstore.DeadLetter) { d.Attempts = -1 }, "dead letter attempts"},
		{"attempts 2^31", func(d *eventstore.DeadLetter) { d.Attempts = 1 << 31 }, "dead letter attempts"},
		{"NUL byte in error", func(d *eventstore.DeadLetter) { d.Error = "bo\x00om" }, "dead letter error"},
		{"invalid UTF-8 error", func(d *eventstore.DeadLetter) { d.Error = "bo\xffom" }, "dead letter error"},
		{"empty event type", func(d *eventstore.DeadLetter) { d.Event.Type = "" }, "dead letter event type"},
		{"NUL byte in event type", func(d *eventstore.DeadLetter) { d.Event.Type = "t\x00" }, "dead letter event type"},
		{"NUL byte in stream", func(d *eventstore.DeadLetter) { d.Event.StreamID = "s\x00" }, "dead letter stream"},
		{"system stream", func(d *eventstore.DeadLetter) { d.Event.StreamID = "$x" }, "dead letter stream"},
		{"NUL byte in correlation ID", func(d *eventstore.DeadLetter) { d.Event.Metadata.CorrelationID = "c\x00" }, "dead letter event correlation ID"},
		{"invalid UTF-8 causation ID", func(d *eventstore.DeadLetter) { d.Event.Metadata.CausationID = "c\xff" }, "dead letter event causation ID"},
		{"overlong command ID", func(d *eventstore.DeadLetter) {
			d.Event.Metadata.CommandID = strings.Repeat("c", storekit.MaxCommandIDLen+1)
		}, "dead letter event command ID"},
		{"NUL byte in metadata value", func(d *eventstore.DeadLetter) { d.Event.Metadata.Extra = map[string]string{"k": "v\x00"} }, "dead letter event metadata"},
		{"invalid UTF-8 metadata value", func(d *eventstore.DeadLetter) { d.Event.Metadata.Extra = map[string]string{"k": "v\xff"} }, "dead letter event metadata"},
		{"empty metadata key", func(d *eventstore.DeadLetter) { d.Event.Metadata.Extra = map[string]string{"": "v"} }, "dead letter event metadata"},
		{"oversize event", func(d *eventstore.DeadLetter) { d.Event.Data = make([]byte, storekit.MaxEventSize+1) }, "dead letter event data"},
		{"largest version", func(d *eventstore.DeadLetter) { d.Event.Version = math.MaxUint64 }, "dead letter version"},
		{"largest position", func(d *eventstore.DeadLetter) { d.Event.Position.Major = math.MaxUint64 }, "dead letter position"},
		{"last failure in 3000", func(d *eventstore.DeadLetter) { d.LastFailure = year(3000) }, "dead letter time"},
		{"first failure in 1000", func(d *eventstore.DeadLetter) { d.FirstFailure = year(1000) }, "dead letter time"},
		{"claimed until 3000", func(d *eventstore.DeadLetter) { d.ClaimedUntil = year(3000) }, "dead letter time"},
		{"event recorded in 3000", func(d *eventstore.DeadLetter) { d.Event.RecordedAt = year(3000) }, "dead letter time"},
		{"generation 2^63", func(d *eventstore.DeadLetter) { d.ID, d.Generation = ulid.Make().String(), 1<<63 }, "dead letter generation"},
		{"generation without an ID", func(d *eventstore.DeadLetter) { d.Generation = 1 }, "dead letter ID"},
	} {
		d := deadLetter(name, 1, 0)
		c.mutate(&d)
		_, err := s.ParkDeadLetter(ctx, d)
		check.Invalid(t, err, c.field, c.what)
	}
	check.Len(t, listDeadLetters(t, s, name), 0, "a refused dead letter was stored")

	// The widest values that are allowed round-trip.
	d := deadLetter(name, math.MaxInt64, math.MaxInt32)
	d.Attempts, d.Event.Position = math.MaxInt32, eventstore.Position{Major: math.MaxInt64, Minor: math.MaxUint64}
	d.FirstFailure, d.LastFailure, d.ClaimedUntil = year(1700), year(2250), year(2260)
	got := mustPark(t, s, d)
	d.ID, d.Generation = got.ID, 1
	sameLetter(t, d, got)
	all := listDeadLetters(t, s, name)
	check.Len(t, all, 1, "listing the consumer's dead letters still works")
	sameLetter(t, d, all[0])
}

func testDeadLetterIDTaken(t testing.TB, s storekit.DeadLetterStore) {
	ctx, name := context.Background(), consumerName(t, "idtaken")
	first := mustPark(t, s, deadLetter(name, 1, 0))
	other := deadLetter(name, 2, 0)
	other.ID = first.ID
	_, err := s.ParkDeadLetter(ctx, other)
	check.Invalid(t, err, "dead letter ID", "an ID that names another event's dead letter")
	check.Contains(t, err.Error(), name)
	check.Contains(t, err.Error(), first.ID)

	all := listDeadLetters(t, s, name)
	check.Len(t, all, 1, "the refused dead letter was stored")
	sameLetter(t, first, all[0])
	// Its own ID parks the same event again.
	again := first
	again.Error, again.Attempts = "again", 9
	check.Equal(t, mustPark(t, s, again).ID, first.ID)
}

func testDeadLetterLookups(t testing.TB, s storekit.DeadLetterStore) {
	ctx, name := context.Background(), consumerName(t, "lookup")
	mustPark(t, s, deadLetter(name, 1, 0))
	for _, id := range []string{"", "\x00", "\xff", "nope", strings.Repeat("x", 4<<10), ulid.Make().String()} {
		_, err := s.DeadLetter(ctx, name, id)
		check.ErrorIs(t, err, eventstore.ErrDeadLetterNotFound, "DeadLetter(%q)", id)
		var nf *storekit.DeadLetterNotFoundError
		check.ErrorAs(t, err, &nf)
		check.Equal(t, nf.Consumer, name)
		check.AtMost(t, len(err.Error()), 512)
		check.ErrorIs(t, s.DeleteDeadLetter(ctx, name, id), eventstore.ErrDeadLetterNotFound, "DeleteDeadLetter(%q)", id)
	}
	_, err := s.DeadLetter(ctx, "bad\x00name", ulid.Make().String())
	check.Invalid(t, err, "consumer name", "DeadLetter with a bad consumer name")
	check.Len(t, listDeadLetters(t, s, name), 1)
}

func testSnapshotBadTable(t testing.TB, s storekit.SnapshotStore) {
	stream := newNames(t).stream("badtable")
	for _, c := range []struct {
		what  string
		snap  storekit.Snapshot
		field string
	}{
		{"NUL byte in type", storekit.Snapshot{Stream: stream, Type: "st\x00ate", Data: []byte("x")}, "snapshot type"},
		{"invalid UTF-8 type", storekit.Snapshot{Stream: stream, Type: "st\xffate", Data: []byte("x")}, "snapshot type"},
		{"newline in type", storekit.Snapshot{Stream: stream, Type: "st\nate", Data: []byte("x")}, "snapshot type"},
		{"largest version", storekit.Snapshot{Stream: stream, Version: math.MaxUint64, Type: "t", Data: []byte("x")}, "snapshot version"},
		{"version 2^63", storekit.Snapshot{Stream: stream, Version: 1 << 63, Type: "t", Data: []byte("x")}, "snapshot version"},
	} {
		check.Invalid(t, s.SaveSnapshot(context.Background(), c.snap), c.field, c.what)
	}
	_, ok, err := s.LoadSnapshot(context.Background(), stream)
	check.NoError(t, err)
	check.True(t, !ok, "a rejected snapshot must not be stored")
}

func testCheckpointBadFences(t testing.TB, s storekit.CheckpointStore) {
	name := consumerName(t, "fence")
	for _, fence := range []storekit.Fence{1 << 63, math.MaxUint64} {
		err := s.SaveCheckpoint(context.Background(), name, eventstore.Start, checkpointAt(1, 0), fence)
		check.Invalid(t, err, "checkpoint fence", fmt.Sprintf("fence %d", fence))
	}
	check.Equal(t, mustCheckpoint(t, s, name), storekit.Checkpoint{}, "a refused save moved the checkpoint")
}

func testCommandUnstorableID(t testing.TB, s indexedStore) {
	stream := newNames(t).stream("a")
	mustAppend(t, s, stream, eventstore.NoStream, commandEvents("c1", 1)...)
	for _, id := range []string{"c\x00", "c\xff", "\x00"} {
		_, found, err := s.CommandResult(context.Background(), stream, id)
		check.NoError(t, err, "command %q", id)
		check.True(t, !found, "command %q", id)
	}
	_, err := s.Append(context.Background(), stream, eventstore.Any,
		commandEvents(strings.Repeat("c", storekit.MaxCommandIDLen+1), 1)...)
	check.Invalid(t, err, "command ID", "an overlong command ID")
	evs := commandEvents(strings.Repeat("c", storekit.MaxCommandIDLen), 1)
	evs[0].ID = uuid.New()
	mustAppend(t, s, stream, eventstore.Any, evs...)
}
