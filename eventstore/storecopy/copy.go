package storecopy

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/trusted"
)

// CheckpointPrefix starts the name of the checkpoint in which a copy keeps
// its progress in the target (see [Options.Name]).
const CheckpointPrefix = "cairn-copy:"

// DefaultProgressEvery is how often [Copy] reports progress when
// [Options.ProgressEvery] is zero.
const DefaultProgressEvery = time.Second

// maxAppendBytes bounds the data and metadata of one append: KurrentDB's
// default maximum append, which the limits of every store follow (one event
// may be that large, so an append holds at least one).
const maxAppendBytes = storekit.MaxEventSize

// Options configure a [Copy]. The zero value copies with progress kept
// under a name derived from the source, no progress reports, a counting
// pass and a verification pass.
type Options struct {
	// Name names the copy's progress in the target, which is kept as the
	// checkpoint CheckpointPrefix+Name when the target keeps checkpoints
	// (a storekit.CheckpointStore, as every store of Cairn is). A rerun
	// with the same name continues after the last source event that the
	// copy recorded.
	//
	// Empty means a name derived from the source: its Go type and the ID
	// and position of its first event, which no other source shares, so
	// that copies from two different stores into one target keep apart.
	// Two sources that are themselves copies of one another can share
	// it (same type, same first event at the same position): give each its
	// own Name when copying both into one target. Whatever the name, a
	// rerun never duplicates events, since the target absorbs a repeated
	// append; a wrong name costs time (a copy from the start) or is caught
	// by the verification pass.
	Name string
	// Progress, when set, is called with the progress of the copy at
	// most every ProgressEvery, and once at the end. It runs on the
	// copying goroutine: a slow Progress slows the copy.
	Progress func(Progress)
	// ProgressEvery is the least time between two calls of Progress; zero
	// means DefaultProgressEvery.
	ProgressEvery time.Duration
	// NoCount skips the pass that counts the events to copy before
	// copying them; Progress then reports Total 0 (unknown) and no ETA.
	NoCount bool
	// NoVerify skips the pass that compares both stores after the copy;
	// Report.Verification is then nil.
	NoVerify bool
	// Consumers copies the consumers' state as well: each checkpoint,
	// translated into the target's positions, and the dead letters. The
	// source must be a storekit.Catalog and a storekit.DeadLetterStore,
	// the target a storekit.CheckpointStore and a storekit.DeadLetterStore
	// (every store of Cairn is all of them); otherwise Copy copies nothing
	// and returns an [*UnsupportedError]. A checkpoint only moves
	// forward: one the target holds at or past the translation (its
	// consumer ran on the target since) is left as it is. See the package
	// documentation.
	Consumers bool
	// Snapshots copies the aggregates' snapshots as well. The source must
	// be a storekit.Catalog, the target a storekit.SnapshotStore.
	Snapshots bool
}

// Progress is how far a running [Copy] is.
type Progress struct {
	// Done counts the source events this run has handled: copied, or
	// found already in the target.
	Done int64
	// Total is the number of source events this run set out to handle,
	// counted before it began; 0 when unknown (Options.NoCount). Events
	// appended to the source meanwhile are copied too, so Done can pass it.
	Total int64
	// Elapsed is the time since the copy began, the counting pass
	// included.
	Elapsed time.Duration
	// Rate is the copy's speed so far, in events per second.
	Rate float64
	// ETA is the estimated time left; 0 when Total is unknown.
	ETA time.Duration
	// Final is set on the last call, made when the copy (without its
	// verification pass) has ended, with or without an error.
	Final bool
}

// Report says what a [Copy] did. Copy returns it with what was done so
// far, also when it fails.
type Report struct {
	// Checkpoint is the name under which the target keeps the copy's
	// progress; empty when the target keeps no checkpoints, so that a
	// rerun starts from the beginning.
	Checkpoint string
	// ResumedAfter is the source position this run started after:
	// eventstore.Start, or where an earlier run stopped.
	ResumedAfter eventstore.Position
	// Last is the source position of the last event copied (or found
	// already copied) so far, ResumedAfter when none.
	Last eventstore.Position
	// Copied counts the events this run appended to the target.
	Copied int64
	// Duplicates counts the source events that the target already held:
	// appends an earlier run made but did not record (it stopped between
	// the append and the checkpoint), or all of them without a checkpoint.
	Duplicates int64
	// Appends counts the appends that wrote events.
	Appends int64
	// Consumers counts the consumers' checkpoints that this run saved in
	// the target, translated (Options.Consumers): a rerun that finds them
	// in place saves, and counts, none.
	Consumers int64
	// DeadLetters counts the dead letters this run parked in the target
	// (Options.Consumers); those the target held already are not counted.
	DeadLetters int64
	// Snapshots counts the snapshots this run saved in the target
	// (Options.Snapshots); those the target held alike are not counted.
	Snapshots int64
	// Elapsed is the time the copy took, verification included.
	Elapsed time.Duration
	// Verification is the result of the verification pass; nil when it
	// did not run (Options.NoVerify, or the copy failed).
	Verification *Verification
}

// Copy copies every event of from into to, in from's global order, and
// returns what it did. See the package documentation for what is kept and
// what is not.
//
// Events are appended stream run by stream run: each run of consecutive
// source events of one stream (within storekit.MaxAppendEvents and 1 MiB)
// is one append expecting exactly the stream version before it, so the
// target's versions are the source's. A target stream that holds other
// events there stops the copy with a [*ConflictError]. When the target is
// a storekit.CheckpointStore, the copy records the last source position
// copied after each append (see [Options.Name]), and a rerun continues
// from there.
//
// With Options.Consumers and Options.Snapshots, Copy also carries the
// consumers' checkpoints (translated into the target's positions) and dead
// letters, and the aggregates' snapshots: see the package documentation.
// A store that lacks what they need is an [*UnsupportedError], a consumer
// that runs on the target a [*LeasedError], and Copy then copies nothing.
//
// Copy stops at the end of ctx, with whole appends in the target, and
// returns ctx's error. nil stores, or the same store as from and to, are
// an *eventstore.InvalidArgumentError. When the verification pass finds
// streams that differ, the error matches [ErrMismatch] and
// Report.Verification lists them.
func Copy(ctx context.Context, from, to eventstore.Store, opts Options) (Report, error) {
	if err := checkStores(from, to); err != nil {
		return Report{}, err
	}
	state, err := checkState(from, to, opts)
	if err != nil {
		return Report{}, err
	}
	c := &copier{from: from, to: to, opts: opts, state: state, began: time.Now()}
	if c.opts.ProgressEvery <= 0 {
		c.opts.ProgressEvery = DefaultProgressEvery
	}
	err = c.run(ctx)
	c.report.Elapsed = time.Since(c.began)
	return c.report, err
}

// copier is one run of Copy.
type copier struct {
	from, to eventstore.Store
	opts     Options
	began    time.Time

	checkpoints storekit.CheckpointStore // nil when the target keeps none
	fence       storekit.Fence
	saved       eventstore.Position // the checkpoint as stored

	state      stateStores
	consumers  []storekit.ConsumerInfo // the source's, with Options.Consumers
	translator *translator             // nil without Options.Consumers

	total, done  int64
	lastProgress time.Time
	report       Report
}

func (c *copier) run(ctx context.Context) error {
	if err := c.resume(ctx); err != nil {
		return err
	}
	if c.opts.Consumers {
		if c.checkpoints == nil {
			// An empty source: no event to copy, nothing to translate
			// to, and no name to keep progress under.
			return nil
		}
		if err := c.loadConsumers(ctx); err != nil {
			return err
		}
		if err := c.scanCopied(ctx); err != nil {
			return err
		}
	}
	if !c.opts.NoCount {
		n, err := count(ctx, c.from, c.report.ResumedAfter)
		if err != nil {
			return err
		}
		c.total = n
	}
	err := c.copyEvents(ctx)
	c.progress(true)
	if err == nil && c.opts.Consumers {
		err = c.copyDeadLetters(ctx)
	}
	if err == nil && c.opts.Snapshots {
		err = c.copySnapshots(ctx)
	}
	if err != nil || c.opts.NoVerify {
		return err
	}
	v, err := verify(ctx, c.from, c.to, c.report.Last)
	if err != nil {
		return err
	}
	c.report.Verification = &v
	if len(v.Mismatches) > 0 {
		m := v.Mismatches[0]
		return fmt.Errorf("%w: %d of %d streams, the first %q from version %d",
			ErrMismatch, len(v.Mismatches), v.Streams, m.Stream, m.Version)
	}
	return nil
}

// resume finds the checkpoint of the copy in the target, when it keeps
// checkpoints, and the position to start after.
func (c *copier) resume(ctx context.Context) error {
	cs, ok := c.to.(storekit.CheckpointStore)
	if !ok {
		return nil
	}
	name := c.opts.Name
	if name == "" {
		var err error
		if name, err = defaultName(ctx, c.from); err != nil || name == "" {
			return err // an empty source: nothing to copy, nothing to record
		}
	}
	name = CheckpointPrefix + name
	if err := storekit.ValidateConsumerName(name); err != nil {
		return err
	}
	cp, err := cs.Checkpoint(ctx, name)
	if err != nil {
		return fmt.Errorf("storecopy: read the checkpoint %q of the target: %w", name, err)
	}
	c.checkpoints, c.fence, c.saved = cs, cp.Fence, cp.Position
	c.report.Checkpoint = name
	c.report.ResumedAfter, c.report.Last = cp.Position, cp.Position
	return nil
}

// defaultName derives the copy's name from its source: the store's Go
// type and its first event; "" for an empty source.
func defaultName(ctx context.Context, from eventstore.Store) (string, error) {
	for e, err := range from.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		if err != nil {
			return "", fmt.Errorf("storecopy: read the source's first event: %w", err)
		}
		return fmt.Sprintf("%T:%s@%s", from, e.ID, e.Position), nil
	}
	return "", nil
}

// count is the counting pass: the source events after after.
func count(ctx context.Context, from eventstore.Store, after eventstore.Position) (int64, error) {
	var n int64
	for _, err := range from.ReadAll(ctx, after, eventstore.Filter{}) {
		if err != nil {
			return n, fmt.Errorf("storecopy: count the source's events: %w", err)
		}
		n++
	}
	return n, nil
}

// batch is a run of source events of one stream, appended together.
type batch struct {
	stream string
	first  uint64 // the stream version of events[0]
	events []eventstore.EventData
	bytes  int
	last   eventstore.Position // the source position of the last event
}

// fits reports whether e continues b within an append's limits.
func (b *batch) fits(e *eventstore.Event) bool {
	return len(b.events) == 0 || e.StreamID == b.stream && e.Version == b.first+uint64(len(b.events)) &&
		len(b.events) < storekit.MaxAppendEvents && b.bytes+storekit.PageBytes(e) <= maxAppendBytes
}

func (b *batch) add(e *eventstore.Event) {
	if len(b.events) == 0 {
		b.stream, b.first = e.StreamID, e.Version
	}
	b.events = append(b.events, e.EventData.Clone())
	b.bytes += storekit.PageBytes(e)
	b.last = e.Position
}

func (c *copier) copyEvents(ctx context.Context) error {
	var b batch
	for e, err := range c.from.ReadAll(ctx, c.report.ResumedAfter, eventstore.Filter{}) {
		if err != nil {
			return fmt.Errorf("storecopy: read the source after %s: %w", c.report.Last, err)
		}
		if c.translator != nil {
			// Before e joins a batch: the checkpoints it resolves map to
			// events already in b or appended, which the next flush
			// writes after its append.
			c.translator.feed(&e)
		}
		if !b.fits(&e) {
			if err := c.flush(ctx, &b); err != nil {
				return err
			}
		}
		b.add(&e)
	}
	if c.translator != nil {
		c.translator.end()
	}
	if len(b.events) == 0 {
		return c.writeCheckpoints(ctx)
	}
	return c.flush(ctx, &b)
}

// flush appends b to the target, records the copy's progress and empties b.
func (c *copier) flush(ctx context.Context, b *batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	expected := eventstore.NoStream
	if b.first > 0 {
		expected = eventstore.Exact(b.first - 1)
	}
	// The copy writes Cairn's own records (saga streams, "cairn." types
	// and keys) as they are: it is one of Cairn's own writers.
	res, err := c.to.Append(trusted.Writer(ctx), b.stream, expected, b.events...)
	var held int
	switch {
	case err == nil && res.Duplicate:
		held = len(b.events)
	case err == nil:
	case errors.Is(err, eventstore.ErrWrongVersion) || errors.Is(err, eventstore.ErrEventIDConflict):
		if held, err = c.reconcile(ctx, b, err); err != nil {
			return err
		}
	default:
		return fmt.Errorf("storecopy: append %d events to stream %q from version %d: %w", len(b.events), b.stream, b.first, err)
	}
	c.report.Duplicates += int64(held)
	c.report.Copied += int64(len(b.events) - held)
	if held < len(b.events) {
		c.report.Appends++
	}
	if err := c.writeCheckpoints(ctx); err != nil {
		return err
	}
	if c.checkpoints != nil {
		if err := c.checkpoints.SaveCheckpoint(ctx, c.report.Checkpoint, c.saved, b.last, c.fence); err != nil {
			return fmt.Errorf("storecopy: record the copy's progress at %s in checkpoint %q: %w", b.last, c.report.Checkpoint, err)
		}
		c.saved = b.last
	}
	c.report.Last = b.last
	c.done += int64(len(b.events))
	*b = batch{events: b.events[:0]}
	c.progress(false)
	return nil
}

// reconcile handles an append that the target refused as a wrong version
// or an event ID conflict: the target may hold the start of the run
// already (an earlier run appended it, before the source's stream grew),
// in which case the rest is appended; anything else is a conflict. It
// returns how many of b's events the target held.
func (c *copier) reconcile(ctx context.Context, b *batch, refused error) (int, error) {
	held := 0
	for t, err := range c.to.ReadStream(ctx, b.stream, eventstore.ReadOptions{From: b.first, Limit: len(b.events)}) {
		if err != nil {
			return 0, fmt.Errorf("storecopy: read stream %q of the target from version %d: %w", b.stream, b.first, err)
		}
		if t.Version != b.first+uint64(held) || !sameEvent(&t.EventData, &b.events[held]) {
			return 0, &ConflictError{Stream: b.stream, Version: b.first + uint64(held),
				SourceID: b.events[held].ID, TargetID: t.ID, Err: refused}
		}
		held++
	}
	switch {
	case held == 0:
		return 0, &ConflictError{Stream: b.stream, Version: b.first, SourceID: b.events[0].ID, Err: refused}
	case held == len(b.events):
		return held, nil
	}
	first := b.first + uint64(held)
	res, err := c.to.Append(trusted.Writer(ctx), b.stream, eventstore.Exact(first-1), b.events[held:]...)
	switch {
	case err == nil && res.Duplicate:
		return len(b.events), nil
	case err == nil:
		return held, nil
	case errors.Is(err, eventstore.ErrWrongVersion) || errors.Is(err, eventstore.ErrEventIDConflict):
		return 0, &ConflictError{Stream: b.stream, Version: first, SourceID: b.events[held].ID, Err: err}
	default:
		return 0, fmt.Errorf("storecopy: append %d events to stream %q from version %d: %w", len(b.events)-held, b.stream, first, err)
	}
}

// progress calls Options.Progress when it is time to, or when final.
func (c *copier) progress(final bool) {
	if c.opts.Progress == nil {
		return
	}
	now := time.Now()
	if !final && now.Sub(c.lastProgress) < c.opts.ProgressEvery {
		return
	}
	c.lastProgress = now
	p := Progress{Done: c.done, Total: c.total, Elapsed: now.Sub(c.began), Final: final}
	if secs := p.Elapsed.Seconds(); secs > 0 {
		p.Rate = float64(p.Done) / secs
	}
	if p.Total > 0 && p.Rate > 0 && p.Total > p.Done {
		p.ETA = time.Duration(float64(p.Total-p.Done) / p.Rate * float64(time.Second))
	}
	c.opts.Progress(p)
}

// checkStores refuses nil stores and a copy of a store onto itself.
func checkStores(from, to eventstore.Store) error {
	for _, s := range [...]struct {
		name  string
		store eventstore.Store
	}{{"from", from}, {"to", to}} {
		if isNil(s.store) {
			return &eventstore.InvalidArgumentError{Index: -1, Field: s.name, Reason: "is a nil store"}
		}
	}
	if t := reflect.TypeOf(from); t == reflect.TypeOf(to) && t.Comparable() && from == to {
		return &eventstore.InvalidArgumentError{Index: -1, Field: "to", Reason: "is the same store as from: a store cannot be copied onto itself"}
	}
	return nil
}

// isNil reports whether s is nil, or a nil pointer (or map, func...) in an
// interface, whose methods would panic.
func isNil(s eventstore.Store) bool {
	if s == nil {
		return true
	}
	switch v := reflect.ValueOf(s); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Interface, reflect.Slice:
		return v.IsNil()
	}
	return false
}
