// Package linearize checks that an [eventstore.Store]'s appends and stream
// reads are linearizable: that every history of concurrent appends and reads
// it produces could have happened one operation at a time, each taking
// effect at some instant between its call and its return, in the order the
// store contract describes.
//
// It records histories of many goroutines racing expected-version appends,
// idempotent re-sends, abandoned appends and reads on a few streams, and
// checks them with the porcupine linearizability checker, stream by stream
// (streams are independent objects). A store's own test calls [Run]:
//
//	func TestLinearizable(t *testing.T) {
//		linearize.Run(t, func(t *testing.T) eventstore.Store {
//			s := memory.New()
//			t.Cleanup(func() { s.Close() })
//			return s
//		}, linearize.Sized(t))
//	}
//
// Unlike the conformance suite in eventstore/storetest, it imposes no
// assertion library: it reports through [testing.TB] alone. Importing it
// adds the porcupine module to the importer's test builds, and nothing to
// builds that do not import it.
//
// Why its checks stay fast at 64 clients, and the figures it produced for
// Cairn's stores, are in docs/reliability.md.
package linearize

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/cairn-es/cairn/eventstore"
)

// Options sizes a history and says what the store promises. The zero value
// is [Quick]'s size.
type Options struct {
	// Clients is how many goroutines append and read at once. Zero means 16.
	Clients int
	// Streams is how many streams they share. Zero means 3.
	Streams int
	// Operations is how many operations a history holds, spread evenly over
	// the clients (so rounded down to a multiple of Clients). Zero means
	// 800.
	Operations int
	// Histories is how many histories [Run] records and checks, each on a
	// store of its own, with seeds Seed, Seed+1, ... Zero means 1.
	Histories int
	// Seed drives every client's choices. Zero picks one at random, which
	// the report names. The interleaving is the scheduler's, so a seed
	// repeats a workload, not a history.
	Seed uint64
	// CheckTimeout bounds the checker on one history. Zero means one
	// minute. A check that times out fails: it means the history was too
	// large to decide, never that it was linearizable.
	CheckTimeout time.Duration
	// DeadlineRate is the share of new appends sent with a deadline under a
	// millisecond, which leaves some of their outcomes unknown to the
	// client. Zero means 0.03; negative means none.
	DeadlineRate float64
	// CanceledAppendsWriteNothing says that the store promises that an
	// append which returns its context's error wrote nothing, as the
	// memory and SQLite stores do. The checker then holds the store to it;
	// otherwise such an append is of unknown outcome.
	CanceledAppendsWriteNothing bool
	// VisualizationDir is where a failed check writes porcupine's HTML
	// visualization of the history. Empty means a new directory under
	// [os.TempDir], which outlives the test so that the file can be opened.
	VisualizationDir string
}

// Environment variables that [Sized] reads.
const (
	// TortureEnv, set to anything but "" or "0", selects [Torture].
	TortureEnv = "CAIRN_TORTURE"
	// SeedEnv sets [Options.Seed], to repeat a reported seed.
	SeedEnv = "CAIRN_LINEARIZE_SEED"
	// DirEnv sets [Options.VisualizationDir].
	DirEnv = "CAIRN_LINEARIZE_DIR"
)

// Quick returns the size that runs in every test run: 16 clients, 3
// streams, 800 operations, one history, checked within 10 seconds. Under
// the race detector on two cores it records in about 8 seconds on SQLite
// (a commit waits for the disk), 2 on PostgreSQL and well under one in
// memory, and checks in milliseconds.
func Quick() Options {
	return Options{Clients: 16, Streams: 3, Operations: 800, Histories: 1, CheckTimeout: 10 * time.Second}
}

// Torture returns the full size: 64 clients, 4 streams, 20,000
// operations, five histories, each checked within five minutes (on a
// two-core machine each took seconds; see docs/reliability.md).
func Torture() Options {
	return Options{Clients: 64, Streams: 4, Operations: 20000, Histories: 5, CheckTimeout: 5 * time.Minute}
}

// Sized returns [Torture] when the environment variable [TortureEnv] is set,
// else [Quick], with [SeedEnv] and [DirEnv] applied. It fails tb on a
// malformed seed.
func Sized(tb testing.TB) Options {
	tb.Helper()
	opts := Quick()
	if v := os.Getenv(TortureEnv); v != "" && v != "0" {
		opts = Torture()
	}
	if v := os.Getenv(SeedEnv); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			tb.Fatalf("linearize: %s=%q is not a seed: %v", SeedEnv, v, err)
		}
		opts.Seed = seed
	}
	opts.VisualizationDir = os.Getenv(DirEnv)
	return opts
}

// OptionError reports an [Options] field out of range.
type OptionError struct {
	// Field is the field's name, such as "Clients".
	Field string
	// Reason says what is wrong with it.
	Reason string
}

func (e *OptionError) Error() string { return "linearize: option " + e.Field + " " + e.Reason }

// withDefaults fills in zero fields and checks the others.
func (o Options) withDefaults() (Options, error) {
	for _, f := range []struct {
		name string
		v    *int
		def  int
	}{{"Clients", &o.Clients, 16}, {"Streams", &o.Streams, 3}, {"Operations", &o.Operations, 800}, {"Histories", &o.Histories, 1}} {
		switch {
		case *f.v < 0:
			return o, &OptionError{Field: f.name, Reason: fmt.Sprintf("is %d, below zero", *f.v)}
		case *f.v == 0:
			*f.v = f.def
		}
	}
	switch {
	case o.CheckTimeout < 0:
		return o, &OptionError{Field: "CheckTimeout", Reason: fmt.Sprintf("is %s, below zero", o.CheckTimeout)}
	case o.CheckTimeout == 0:
		o.CheckTimeout = time.Minute
	}
	switch {
	case o.DeadlineRate > 1:
		return o, &OptionError{Field: "DeadlineRate", Reason: fmt.Sprintf("is %g, above 1", o.DeadlineRate)}
	case o.DeadlineRate == 0:
		o.DeadlineRate = 0.03
	}
	if o.Seed == 0 {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			return o, fmt.Errorf("linearize: read random bytes for a seed: %w", err)
		}
		o.Seed = uint64(binary.BigEndian.Uint32(b[:])) | 1 // never zero; short enough to type
	}
	return o, nil
}

// Result is the checker's verdict on a history.
type Result string

const (
	// Linearizable: some order of the operations, each at an instant
	// within its call and return, explains every result.
	Linearizable Result = "linearizable"
	// NotLinearizable: none does; the store broke its contract.
	NotLinearizable Result = "not linearizable"
	// TimedOut: the checker gave up (see [Options.CheckTimeout]).
	TimedOut Result = "timed out"
)

// Report describes one recorded and checked history.
type Report struct {
	// Seed, Clients and Streams are the history's options.
	Seed             uint64
	Clients, Streams int
	// Operations counts the operations recorded, Appends + Reads; OK, Fail
	// and Unknown count them as Jepsen's ok, fail and info (reads are all
	// ok).
	Operations        int
	Appends, Reads    int
	OK, Fail, Unknown int
	// Duplicates counts the appends (among OK) that the store answered as
	// repeats of earlier ones, and Canceled those (among Fail) that ended
	// with their context on a store that promises they wrote nothing.
	Duplicates, Canceled int
	// Unexpected counts errors that are neither conflicts nor the end of a
	// deliberate deadline, such as a lost connection; FirstUnexpected is
	// the first of them. Such an append is of unknown outcome, such a read
	// is left out of the history.
	Unexpected      int
	FirstUnexpected error
	// Overlap is the mean number of operations on the same stream whose
	// call-to-return interval overlaps an operation's: how much the
	// history actually raced. An append of unknown outcome counts with the
	// interval its client saw.
	Overlap float64
	// Result is the checker's verdict.
	Result Result
	// Visualization is the path of the HTML page porcupine wrote for a
	// history that is not linearizable, and VisualizationErr why it could
	// not be written.
	Visualization    string
	VisualizationErr error
	// Recorded and Checked are how long the workload and the check took.
	Recorded, Checked time.Duration
}

// String summarizes the report on one line.
func (r Report) String() string {
	return fmt.Sprintf("seed %d, %d clients on %d streams: %d operations (%d appends, %d reads): "+
		"%d ok (%d duplicates), %d fail (%d canceled), %d unknown, %d unexpected errors; "+
		"each overlapped %.1f others on its stream: %s (recorded in %s, checked in %s)",
		r.Seed, r.Clients, r.Streams, r.Operations, r.Appends, r.Reads, r.OK, r.Duplicates, r.Fail, r.Canceled,
		r.Unknown, r.Unexpected, r.Overlap, r.Result, r.Recorded.Round(time.Millisecond), r.Checked.Round(time.Millisecond))
}

// Verify records one history on s and checks it. It returns an error only
// when it could not record or check the history: bad options, the end of
// ctx, or an append of its own that s calls malformed. A verdict against s
// is in the report, not in the error.
func Verify(ctx context.Context, s eventstore.Store, opts Options) (Report, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return Report{}, err
	}
	ids, err := newIDSpace()
	if err != nil {
		return Report{}, err
	}
	// The ID prefix also names the streams, so that histories on a shared
	// server never meet.
	names := make([]string, opts.Streams)
	for i := range names {
		names[i] = fmt.Sprintf("linearize-%s-%d", hex.EncodeToString(ids.template[:4]), i)
	}
	rec := &recorder{store: s, opts: opts, names: names, ids: ids}

	report := Report{Seed: opts.Seed, Clients: opts.Clients, Streams: opts.Streams}
	start := time.Now()
	ops, tallies, err := rec.record(ctx)
	if err != nil {
		return report, fmt.Errorf("linearize: seed %d: %w", opts.Seed, err)
	}
	report.Recorded = time.Since(start)
	for _, t := range tallies {
		report.Appends += t.appends
		report.Reads += t.reads
		report.OK += t.ok
		report.Fail += t.fail
		report.Unknown += t.unknown
		report.Duplicates += t.duplicates
		report.Canceled += t.canceled
		report.Unexpected += t.unexpected
		if report.FirstUnexpected == nil {
			report.FirstUnexpected = t.firstUnexpected
		}
	}
	report.Operations = len(ops)
	report.Overlap = meanOverlap(ops)
	ops = mergeAlike(seal(ops, len(names), opts.Clients))

	model := newModel(names)
	start = time.Now()
	switch porcupine.CheckOperationsTimeout(model, ops, opts.CheckTimeout) {
	case porcupine.Ok:
		report.Result = Linearizable
	case porcupine.Illegal:
		report.Result = NotLinearizable
		// Only a failed history is checked again, for the partial
		// linearizations that the visualization draws: the verbose check
		// explores every stream to the end instead of stopping at the
		// first illegal one.
		_, info := porcupine.CheckOperationsVerbose(model, ops, opts.CheckTimeout)
		report.Visualization, report.VisualizationErr = visualize(model, info, opts)
	default:
		report.Result = TimedOut
	}
	report.Checked = time.Since(start)
	return report, nil
}

// meanOverlap returns the mean number of operations on the same stream
// that each operation of a recorded (not yet sealed) history overlaps.
func meanOverlap(ops []porcupine.Operation) float64 {
	var total, counted int
	for _, part := range partition(ops) {
		var calls, returns []int64
		for _, op := range part {
			calls = append(calls, op.Call)
			returns = append(returns, op.Return)
		}
		slices.Sort(calls)
		slices.Sort(returns)
		// An operation overlaps every other one called by its return that
		// did not return before its call.
		for _, op := range part {
			calledBy, _ := slices.BinarySearch(calls, op.Return+1)     // calls <= its return
			returnedBefore, _ := slices.BinarySearch(returns, op.Call) // returns < its call
			total += calledBy - returnedBefore - 1
			counted++
		}
	}
	if counted == 0 {
		return 0
	}
	return float64(total) / float64(counted)
}

// visualize writes porcupine's page for a failed history and returns its
// path.
func visualize(model porcupine.Model, info porcupine.LinearizationInfo, opts Options) (string, error) {
	dir := opts.VisualizationDir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "cairn-linearize-"); err != nil {
			return "", fmt.Errorf("linearize: make a directory for the visualization: %w", err)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("linearize: make the visualization directory: %w", err)
	}
	path := filepath.Join(dir, fmt.Sprintf("history-seed-%d.html", opts.Seed))
	if err := porcupine.VisualizePath(model, info, path); err != nil {
		return "", fmt.Errorf("linearize: write the visualization to %s: %w", path, err)
	}
	return path, nil
}

// Check records one history on s and checks it, failing tb when it is not
// linearizable, when the checker times out, or when s returned errors that
// a healthy store does not return under this load. It logs the report, and
// on failure the seed and the visualization's path.
func Check(tb testing.TB, s eventstore.Store, opts Options) Report {
	tb.Helper()
	report, err := Verify(context.Background(), s, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Log(report)
	switch report.Result {
	case NotLinearizable:
		where := report.Visualization
		if report.VisualizationErr != nil {
			where = "not written: " + report.VisualizationErr.Error()
		}
		tb.Errorf("linearize: the history of seed %d is not linearizable; visualization: %s; "+
			"the same workload runs again with %s=%d", report.Seed, where, SeedEnv, report.Seed)
	case TimedOut:
		tb.Errorf("linearize: the checker did not decide the history of seed %d within its timeout: "+
			"the history is too large for it, which proves nothing; make it smaller", report.Seed)
	}
	if report.Unexpected > 0 {
		tb.Errorf("linearize: the store returned %d unexpected errors, the first: %v",
			report.Unexpected, report.FirstUnexpected)
	}
	return report
}

// Run checks opts.Histories histories, each as a subtest on a store of its
// own from newStore, with seeds opts.Seed, opts.Seed+1, ...
func Run(t *testing.T, newStore func(t *testing.T) eventstore.Store, opts Options) {
	t.Helper()
	opts, err := opts.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	for i := range opts.Histories {
		o := opts
		o.Seed = opts.Seed + uint64(i)
		t.Run(fmt.Sprintf("seed=%d", o.Seed), func(t *testing.T) {
			Check(t, newStore(t), o)
		})
	}
}
