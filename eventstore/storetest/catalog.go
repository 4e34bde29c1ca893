package storetest

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/check"
	"github.com/cairn-es/cairn/internal/trusted"
)

// catalogStore is a store that lists what it holds.
type catalogStore interface {
	eventstore.Store
	storekit.Catalog
}

// catalogTests check a [storekit.Catalog]. The suite may run on a store
// that holds other data (a shared server), so each case lists only what
// its unique names select: streams by their category's prefix, snapshots
// after the category's name, and consumers by picking its own names out
// of the whole listing.
var catalogTests = []testCase[catalogStore]{
	{"StreamsInNameOrder", testCatalogStreams},
	{"StreamsPrefixIsExact", testCatalogStreamsPrefix},
	{"StreamsResumeAfter", testCatalogStreamsAfter},
	{"SagaStreams", testCatalogSagaStreams},
	{"Consumers", testCatalogConsumers},
	{"Snapshots", testCatalogSnapshots},
	{"BreakStopsEarly", testCatalogBreak},
	{"CanceledContext", testCatalogCanceled},
}

// catalogStreams appends to streams of one category whose names sort
// differently by bytes than by any locale (upper case before lower case,
// "é" after "z", punctuation between), and which include LIKE's wildcards,
// and returns the category's prefix and the streams' names in byte order.
func catalogStreams(t testing.TB, s eventstore.Store) (prefix string, streams []string) {
	n := newNames(t)
	for i, id := range []string{"a", "B", "a%b", "a_c", "aXc", "é", "z"} {
		mustAppend(t, s, n.stream(id), eventstore.NoStream, events("catalog.x", 1+i%2)...)
		streams = append(streams, n.stream(id))
	}
	// The first stream's last event comes last, after the others'.
	mustAppend(t, s, n.stream("a"), eventstore.Any, event("catalog.x", "last"))
	slices.Sort(streams)
	return eventstore.Category(n.category), streams
}

// listStreams collects a Streams listing, failing the test on error.
func listStreams(t testing.TB, s storekit.Catalog, prefix, after string) []storekit.StreamInfo {
	t.Helper()
	var out []storekit.StreamInfo
	for info, err := range s.Streams(context.Background(), prefix, after) {
		check.NoError(t, err, "listing streams with prefix %q after %q", prefix, after)
		out = append(out, info)
	}
	return out
}

// streamNames returns the names of listed streams, nil for none.
func streamNames(infos []storekit.StreamInfo) []string {
	var out []string
	for _, info := range infos {
		out = append(out, info.Name)
	}
	return out
}

// requireStreamInfo checks a listed stream against what ReadStream reads
// of it: the last event's version and position.
func requireStreamInfo(t testing.TB, s eventstore.Store, info storekit.StreamInfo) {
	t.Helper()
	evs := readStream(t, s, info.Name, eventstore.Forward(0))
	check.True(t, len(evs) > 0, "listed stream %q reads no events", info.Name)
	last := evs[len(evs)-1]
	check.Equal(t, info, storekit.StreamInfo{Name: info.Name, LastVersion: last.Version, LastPosition: last.Position},
		"stream %q as listed", info.Name)
}

func testCatalogStreams(t testing.TB, s catalogStore) {
	prefix, streams := catalogStreams(t, s)
	got := listStreams(t, s, prefix, "")
	check.Equal(t, streamNames(got), streams, "the streams of the category, in byte order")
	for _, info := range got {
		requireStreamInfo(t, s, info)
	}
	check.Equal(t, got[0].LastVersion, uint64(1), "stream %q has two events", got[0].Name)
}

func testCatalogStreamsPrefix(t testing.TB, s catalogStore) {
	prefix, _ := catalogStreams(t, s)
	for _, c := range []struct {
		prefix string
		want   []string
	}{
		{"a", []string{"a", "a%b", "aXc", "a_c"}},
		{"a%", []string{"a%b"}}, // not LIKE's "any string"
		{"a_", []string{"a_c"}}, // nor its "any character"
		{"a%b", []string{"a%b"}},
		{"B", []string{"B"}},
		{"b", nil},
		{"\xc3", []string{"é"}}, // the first byte of "é": a prefix of bytes, not of runes
		{"é", []string{"é"}},
		{"zz", nil},
		{"\xff", nil},       // no valid name holds it
		{"a\x00", nil},      // nor this
		{"\U0010FFFF", nil}, // the last rune: no name above it
		{"a%\xff\xfe", nil}, // invalid after a valid start
		{"a%b\U0010FFFF", nil},
	} {
		var want []string
		for _, id := range c.want {
			want = append(want, prefix+id)
		}
		check.Equal(t, streamNames(listStreams(t, s, prefix+c.prefix, "")), want, "streams with prefix %q", prefix+c.prefix)
	}
	// A prefix that matches no stream of the store at all.
	check.Len(t, listStreams(t, s, prefix+"none", ""), 0, "streams with an unmatched prefix")
}

func testCatalogStreamsAfter(t testing.TB, s catalogStore) {
	prefix, streams := catalogStreams(t, s)
	// after = the last name seen resumes exactly after it, as a pager does.
	for i, name := range streams {
		want := streams[i+1:]
		if len(want) == 0 {
			want = nil // as streamNames has it
		}
		check.Equal(t, streamNames(listStreams(t, s, prefix, name)), want, "streams after %q", name)
	}
	for _, c := range []struct {
		after string
		want  []string
	}{
		{prefix[:len(prefix)-1], streams}, // before the prefix: it still bounds
		{prefix + "a%", streams[2:]},      // between names
		{prefix + "a\xff", streams[5:]},   // not valid UTF-8: after "a_c", before "z"
		{prefix + "\xc3", streams[len(streams)-1:]},
		{prefix + "\U0010FFFF", nil},
		{"\U0010FFFF", nil},
	} {
		check.Equal(t, streamNames(listStreams(t, s, prefix, c.after)), c.want, "streams after %q", c.after)
	}
}

func testCatalogSagaStreams(t testing.TB, s catalogStore) {
	n := newNames(t)
	saga := storekit.ReservedStreamPrefix + n.stream("order")
	mustAppend(t, trustedStore{s}, saga, eventstore.NoStream, event("x", "1"), event("x", "2"))
	got := listStreams(t, s, storekit.ReservedStreamPrefix+n.category, "")
	check.Equal(t, streamNames(got), []string{saga}, "Cairn's saga streams are listed")
	requireStreamInfo(t, s, got[0])
	// With no prefix, it is listed among the rest (the next stream after
	// the category's name must be it).
	for info, err := range s.Streams(context.Background(), "", storekit.ReservedStreamPrefix+n.category) {
		check.NoError(t, err)
		check.Equal(t, info, got[0], "the first stream after %q with no prefix", storekit.ReservedStreamPrefix+n.category)
		break
	}
}

// trustedStore appends as Cairn's own writers do, which may write the
// names only Cairn may (a saga's stream).
type trustedStore struct{ eventstore.Store }

func (s trustedStore) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, evs ...eventstore.EventData) (eventstore.AppendResult, error) {
	return s.Store.Append(trusted.Writer(ctx), stream, expected, evs...)
}

// consumerStore is what the Consumers case needs besides the catalog.
type consumerStore interface {
	storekit.CheckpointStore
	storekit.LeaseStore
	storekit.DeadLetterStore
}

// listConsumers collects the consumers of a listing whose names start with
// prefix, and checks that the whole listing is in name order.
func listConsumers(t testing.TB, s storekit.Catalog, prefix string) map[string]storekit.ConsumerInfo {
	t.Helper()
	out := make(map[string]storekit.ConsumerInfo)
	last := ""
	for c, err := range s.Consumers(context.Background()) {
		check.NoError(t, err, "listing consumers")
		check.Less(t, last, c.Name, "consumers out of name order")
		last = c.Name
		if strings.HasPrefix(c.Name, prefix) {
			out[c.Name] = c
		}
	}
	return out
}

func testCatalogConsumers(t testing.TB, s catalogStore) {
	cs, ok := s.(consumerStore)
	if !ok {
		t.Skipf("storetest: %T is not a storekit.CheckpointStore, storekit.LeaseStore and storekit.DeadLetterStore", s)
	}
	ctx, n := context.Background(), newNames(t)
	prefix := eventstore.Category(n.category)
	all, cp, dead, lease := prefix+"all", prefix+"checkpoint", prefix+"dead", prefix+"lease"
	before := time.Now()

	check.NoError(t, cs.SaveCheckpoint(ctx, cp, eventstore.Start, checkpointAt(5, 1), 0))
	leased, ok := mustAcquire(t, cs, lease, "holder-1", time.Minute)
	check.True(t, ok)
	first := time.Date(2026, 1, 2, 3, 4, 5, 6_000, time.UTC)
	park := func(consumer string, version uint64, failed time.Time) eventstore.DeadLetter {
		d := deadLetter(consumer, version, 0)
		d.FirstFailure, d.LastFailure = failed, failed.Add(time.Second)
		return mustPark(t, cs, d)
	}
	oldest := park(dead, 1, first)
	newer := park(dead, 2, first.Add(time.Hour))
	allLease, ok := mustAcquire(t, cs, all, "holder-2", time.Minute)
	check.True(t, ok)
	check.NoError(t, cs.SaveCheckpoint(ctx, all, eventstore.Start, checkpointAt(7, 2), allLease.Fence))
	allLetter := park(all, 3, first.Add(time.Minute))

	got := listConsumers(t, s, prefix)
	check.Equal(t, slices.Sorted(maps.Keys(got)), []string{all, cp, dead, lease}, "the consumers listed")
	requireCheckpoint(t, got[cp], storekit.Checkpoint{Position: checkpointAt(5, 1)}, before)
	requireNoLease(t, got[cp])
	requireDeadLetters(t, got[cp], 0, time.Time{})

	check.True(t, !got[lease].HasCheckpoint, "consumer %q has no checkpoint, but is listed with one", lease)
	check.Equal(t, got[lease].Checkpoint, storekit.Checkpoint{})
	requireLease(t, got[lease], leased)
	requireDeadLetters(t, got[lease], 0, time.Time{})

	check.True(t, !got[dead].HasCheckpoint, "consumer %q has no checkpoint, but is listed with one", dead)
	requireNoLease(t, got[dead])
	requireDeadLetters(t, got[dead], 2, first)

	requireCheckpoint(t, got[all], storekit.Checkpoint{Position: checkpointAt(7, 2), Fence: allLease.Fence}, before)
	requireLease(t, got[all], allLease)
	requireDeadLetters(t, got[all], 1, allLetter.FirstFailure)

	// A released lease is still listed, lapsed.
	check.NoError(t, cs.ReleaseLease(ctx, leased))
	got = listConsumers(t, s, prefix)
	c, ok := got[lease]
	check.True(t, ok && c.HasLease, "consumer %q is not listed with its released lease: %+v", lease, c)
	check.Equal(t, c.Lease.Fence, leased.Fence, "the released lease's fence")
	check.True(t, !c.Lease.Expires.After(time.Now()), "the released lease of %q expires at %s, in the future", lease, c.Lease.Expires)

	// Dead letters go one by one: the oldest's first failure is the next's.
	check.NoError(t, cs.DeleteDeadLetter(ctx, dead, oldest.ID))
	requireDeadLetters(t, listConsumers(t, s, prefix)[dead], 1, newer.FirstFailure)
	check.NoError(t, cs.DeleteDeadLetter(ctx, dead, newer.ID))
	check.NoError(t, cs.DeleteDeadLetter(ctx, all, allLetter.ID))
	got = listConsumers(t, s, prefix)
	check.Equal(t, slices.Sorted(maps.Keys(got)), []string{all, cp, lease},
		"the consumers listed once %q has no dead letters left, nor anything else", dead)
	requireDeadLetters(t, got[all], 0, time.Time{})
	requireCheckpoint(t, got[all], storekit.Checkpoint{Position: checkpointAt(7, 2), Fence: allLease.Fence}, before)

	// What a store keeps for its consumers is not listed as streams (a
	// store that keeps it in streams of its own hides them).
	for _, p := range []string{"cairn", "$"} {
		for info, err := range s.Streams(ctx, p, "") {
			check.NoError(t, err)
			check.True(t, !strings.Contains(info.Name, n.category), "consumer state listed as stream %q", info.Name)
		}
	}
	for info, err := range s.Streams(ctx, "", n.category) {
		check.NoError(t, err)
		check.True(t, !strings.Contains(info.Name, n.category), "consumer state listed as stream %q", info.Name)
		break // the first stream after the category's name is past where ours would be
	}
}

func requireCheckpoint(t testing.TB, c storekit.ConsumerInfo, want storekit.Checkpoint, before time.Time) {
	t.Helper()
	check.True(t, c.HasCheckpoint, "consumer %q is listed without its checkpoint", c.Name)
	check.Equal(t, c.Checkpoint, want, "the checkpoint of %q", c.Name)
	if saved := c.CheckpointSaved; !saved.IsZero() {
		check.Equal(t, saved.Location(), time.UTC, "CheckpointSaved must be in UTC")
		check.True(t, saved.After(before.Add(-time.Minute)) && saved.Before(time.Now().Add(time.Minute)),
			"the checkpoint of %q was saved at %s, not now", c.Name, saved)
	}
}

func requireLease(t testing.TB, c storekit.ConsumerInfo, want storekit.Lease) {
	t.Helper()
	check.True(t, c.HasLease, "consumer %q is listed without its lease", c.Name)
	check.Equal(t, c.Lease.Name, c.Name)
	check.Equal(t, c.Lease.Holder, want.Holder, "the holder of %q", c.Name)
	check.Equal(t, c.Lease.Fence, want.Fence, "the fence of %q", c.Name)
	check.True(t, c.Lease.Expires.After(time.Now()), "the lease of %q expires at %s, not in the future", c.Name, c.Lease.Expires)
}

func requireNoLease(t testing.TB, c storekit.ConsumerInfo) {
	t.Helper()
	check.True(t, !c.HasLease, "consumer %q was never leased, but is listed with %+v", c.Name, c.Lease)
	check.Equal(t, c.Lease, storekit.Lease{})
}

func requireDeadLetters(t testing.TB, c storekit.ConsumerInfo, count int, oldest time.Time) {
	t.Helper()
	check.Equal(t, c.DeadLetters, count, "the dead letters of %q", c.Name)
	check.True(t, c.OldestDeadLetter.Equal(oldest), "the oldest dead letter of %q failed first at %s, want %s", c.Name, c.OldestDeadLetter, oldest)
}

func testCatalogSnapshots(t testing.TB, s catalogStore) {
	ss, ok := s.(storekit.SnapshotStore)
	if !ok {
		t.Skipf("storetest: %T is not a storekit.SnapshotStore", s)
	}
	ctx, n := context.Background(), newNames(t)
	before := time.Now().Add(-time.Minute)
	want := []storekit.Snapshot{snapshotOf(n.stream("a"), 3, "a"), snapshotOf(n.stream("b"), 0, ""), snapshotOf(n.stream("c"), 9, "c")}
	for _, i := range []int{1, 2, 0} {
		check.NoError(t, ss.SaveSnapshot(ctx, want[i]))
	}
	// Ours are the first snapshots after the category's name; a shared
	// store may hold others after them.
	list := func(after string) []storekit.Snapshot {
		var out []storekit.Snapshot
		for snap, err := range s.Snapshots(ctx, after) {
			check.NoError(t, err, "listing snapshots after %q", after)
			if !strings.HasPrefix(snap.Stream, eventstore.Category(n.category)) {
				break
			}
			out = append(out, snap)
		}
		return out
	}
	got := list(n.category)
	check.Len(t, got, len(want), "the snapshots listed")
	for i, snap := range got {
		check.True(t, snap.RecordedAt.After(before) && snap.RecordedAt.Location() == time.UTC,
			"snapshot of %q recorded at %s", snap.Stream, snap.RecordedAt)
		snap.RecordedAt = time.Time{}
		check.Equal(t, snap, want[i], "snapshot %d", i)
	}
	check.Equal(t, len(list(n.stream("a"))), 2, "snapshots after %q", n.stream("a"))
	check.Len(t, list(n.stream("c")), 0, "snapshots after the last")
}

func testCatalogBreak(t testing.TB, s catalogStore) {
	prefix, streams := catalogStreams(t, s)
	ctx := context.Background()
	for info, err := range s.Streams(ctx, prefix, "") {
		check.NoError(t, err)
		check.Equal(t, info.Name, streams[0])
		break
	}
	for _, err := range s.Consumers(ctx) {
		check.NoError(t, err)
		break
	}
	for _, err := range s.Snapshots(ctx, "") {
		check.NoError(t, err)
		break
	}
	// The store is still usable after the listings that were left.
	check.Len(t, listStreams(t, s, prefix, ""), len(streams))
}

func testCatalogCanceled(t testing.TB, s catalogStore) {
	prefix, _ := catalogStreams(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name string
		list func(func(error) bool)
	}{
		{"Streams", func(yield func(error) bool) {
			for _, err := range s.Streams(ctx, prefix, "") {
				if !yield(err) {
					return
				}
			}
		}},
		{"Consumers", func(yield func(error) bool) {
			for _, err := range s.Consumers(ctx) {
				if !yield(err) {
					return
				}
			}
		}},
		{"Snapshots", func(yield func(error) bool) {
			for _, err := range s.Snapshots(ctx, "") {
				if !yield(err) {
					return
				}
			}
		}},
	} {
		var got error
		for err := range c.list {
			got = err
			if err != nil {
				break
			}
		}
		check.ErrorIs(t, got, context.Canceled, "%s with a canceled context", c.name)
	}
}
