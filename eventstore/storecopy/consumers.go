package storecopy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// stateStores are the interfaces that copying consumers' state and
// snapshots needs, found in the source and the target by checkState.
type stateStores struct {
	catalog     storekit.Catalog         // the source's
	fromLetters storekit.DeadLetterStore // the source's
	toLetters   storekit.DeadLetterStore // the target's
	toSnapshots storekit.SnapshotStore   // the target's
}

// checkState finds the interfaces that opts' Consumers and Snapshots need,
// before anything is copied, so that a copy that cannot carry what it was
// asked to carry copies nothing.
func checkState(from, to eventstore.Store, opts Options) (stateStores, error) {
	var s stateStores
	need := func(store eventstore.Store, which, option, iface string, ok bool) error {
		if ok {
			return nil
		}
		return &UnsupportedError{Store: which, Type: fmt.Sprintf("%T", store), Option: option, Missing: iface}
	}
	var ok bool
	var errs []error
	if opts.Consumers || opts.Snapshots {
		option := "Consumers"
		if !opts.Consumers {
			option = "Snapshots"
		}
		s.catalog, ok = from.(storekit.Catalog)
		errs = append(errs, need(from, "source", option, "storekit.Catalog", ok))
	}
	if opts.Consumers {
		s.fromLetters, ok = from.(storekit.DeadLetterStore)
		errs = append(errs, need(from, "source", "Consumers", "storekit.DeadLetterStore", ok))
		_, ok = to.(storekit.CheckpointStore)
		errs = append(errs, need(to, "target", "Consumers", "storekit.CheckpointStore", ok))
		s.toLetters, ok = to.(storekit.DeadLetterStore)
		errs = append(errs, need(to, "target", "Consumers", "storekit.DeadLetterStore", ok))
	}
	if opts.Snapshots {
		s.toSnapshots, ok = to.(storekit.SnapshotStore)
		errs = append(errs, need(to, "target", "Snapshots", "storekit.SnapshotStore", ok))
	}
	return s, errors.Join(errs...)
}

// loadConsumers lists the source's consumers, before the copy pass: their
// checkpoints are then at or before the source's end as the copy pass will
// read it, so that each maps to a copied event. The copies' own
// checkpoints (CheckpointPrefix) are left out: they are positions in
// another store, which a translation would make meaningless.
func (c *copier) loadConsumers(ctx context.Context) error {
	var checkpoints []translation
	for ci, err := range c.state.catalog.Consumers(ctx) {
		if err != nil {
			return fmt.Errorf("storecopy: list the source's consumers: %w", err)
		}
		if strings.HasPrefix(ci.Name, CheckpointPrefix) {
			continue
		}
		c.consumers = append(c.consumers, ci)
		if ci.HasCheckpoint {
			checkpoints = append(checkpoints, translation{consumer: ci.Name, at: ci.Checkpoint.Position})
		}
	}
	c.translator = newTranslator(checkpoints)
	return c.refuseLeased(ctx)
}

// refuseLeased refuses to copy consumers' state into a target where one of
// the consumers holds a live lease: it runs there, and a translated
// checkpoint would move it back to where the source's stands, making it
// apply again what it applied. A target that lists no consumers (no
// storekit.Catalog) is not checked.
func (c *copier) refuseLeased(ctx context.Context) error {
	cat, ok := c.to.(storekit.Catalog)
	if !ok {
		return nil
	}
	copied := make(map[string]bool, len(c.consumers))
	for _, ci := range c.consumers {
		copied[ci.Name] = true
	}
	now := time.Now()
	for ci, err := range cat.Consumers(ctx) {
		if err != nil {
			return fmt.Errorf("storecopy: list the target's consumers: %w", err)
		}
		if copied[ci.Name] && ci.HasLease && ci.Lease.Expires.After(now) {
			return &LeasedError{Consumer: ci.Name, Holder: ci.Lease.Holder, Expires: ci.Lease.Expires}
		}
	}
	return nil
}

// scanCopied feeds the translator, on a rerun, the source events that an
// earlier run copied, as far as the checkpoints that lie among them need,
// and writes those checkpoints. Without it the consumers whose checkpoints
// the resume point has passed would never be translated: the copy pass
// starts after them. It reads the part already copied once more, which a
// copy without Consumers never does.
func (c *copier) scanCopied(ctx context.Context) error {
	resumed := c.report.ResumedAfter
	if resumed.IsZero() || !c.translator.unresolvedBefore(nil) {
		return nil // a first run, or no checkpoint to translate
	}
	// A checkpoint before the first event after the resume point maps to
	// an event already copied.
	var next *eventstore.Position
	for e, err := range c.from.ReadAll(ctx, resumed, eventstore.Filter{}) {
		if err != nil {
			return fmt.Errorf("storecopy: read the source after %s: %w", resumed, err)
		}
		next = &e.Position
		break
	}
	if !c.translator.unresolvedBefore(next) {
		return nil
	}
	for e, err := range c.from.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		if err != nil {
			return fmt.Errorf("storecopy: scan the source's copied events for consumers' checkpoints: %w", err)
		}
		if resumed.Before(e.Position) || !c.translator.unresolvedBefore(next) {
			break
		}
		c.translator.feed(&e)
	}
	if next == nil {
		c.translator.end() // the copy pass has no event to feed
	}
	return c.writeCheckpoints(ctx)
}

// writeCheckpoints saves the translated checkpoints that the translator
// resolved, in the target. Every event they map to is in the target by
// then: the copy pass calls it after the append of the batch that holds
// the last event fed, and before its own checkpoint moves past it, so that
// a crash in between loses none (the rerun translates them again).
//
// A save expects the target's stored checkpoint and fence, and only moves
// it forward: a rerun that finds it there already writes nothing, and one
// that finds it further on leaves it (the consumer ran on the target since
// and applied more; moving it back would apply that again; to move one
// back, reset it on the target). Leases are not copied, since they belong
// to running processes.
func (c *copier) writeCheckpoints(ctx context.Context) error {
	if c.translator == nil {
		return nil
	}
	for _, tr := range c.translator.take() {
		next := eventstore.Start
		if tr.last.ok {
			e, err := c.targetEvent(ctx, tr.last)
			if err != nil {
				return fmt.Errorf("storecopy: translate the checkpoint %s of consumer %q: %w", tr.at, tr.consumer, err)
			}
			next = e.Position
		}
		stored, err := c.checkpoints.Checkpoint(ctx, tr.consumer)
		if err != nil {
			return fmt.Errorf("storecopy: read the checkpoint of consumer %q in the target: %w", tr.consumer, err)
		}
		if !stored.Position.Before(next) {
			// Where the target's checkpoint is already, or past: the
			// service ran on the target since a first copy, and moving
			// its consumer back would make it apply again what it applied.
			continue
		}
		if err := c.checkpoints.SaveCheckpoint(ctx, tr.consumer, stored.Position, next, stored.Fence); err != nil {
			return fmt.Errorf("storecopy: save the checkpoint of consumer %q in the target at %s (%s in the source): %w",
				tr.consumer, next, tr.at, err)
		}
		c.report.Consumers++
	}
	return nil
}

// targetEvent returns the target's copy of the source event ref: the event
// at its stream and version, with its ID.
func (c *copier) targetEvent(ctx context.Context, ref eventRef) (eventstore.Event, error) {
	for e, err := range c.to.ReadStream(ctx, ref.stream, eventstore.ReadOptions{From: ref.version, Limit: 1}) {
		if err != nil {
			return e, fmt.Errorf("read stream %q of the target at version %d: %w", ref.stream, ref.version, err)
		}
		if e.Version != ref.version || e.ID != ref.id {
			break
		}
		return e, nil
	}
	return eventstore.Event{}, &MissingEventError{Stream: ref.stream, Version: ref.version, ID: ref.id}
}

// copyDeadLetters copies the dead letters of the source's consumers, after
// the events, which they refer to: each with its event as the target
// stores it (the target's position, which a retry on the target reads
// after), and the source's ID, part, error, attempts and failure times.
// One that the target holds already is skipped, so that a rerun does not
// park it again (which would count a generation more); claims are not
// copied, as they belong to running retries.
func (c *copier) copyDeadLetters(ctx context.Context) error {
	for _, ci := range c.consumers {
		// Read even when the catalog counted none at the start: the
		// consumer may have parked one since.
		for d, err := range c.state.fromLetters.DeadLetters(ctx, ci.Name) {
			if err != nil {
				return fmt.Errorf("storecopy: read the dead letters of consumer %q in the source: %w", ci.Name, err)
			}
			if _, err := c.state.toLetters.DeadLetter(ctx, ci.Name, d.ID); err == nil {
				continue
			} else if !errors.Is(err, eventstore.ErrDeadLetterNotFound) {
				return fmt.Errorf("storecopy: look up dead letter %s of consumer %q in the target: %w", d.ID, ci.Name, err)
			}
			ref := eventRef{stream: d.Event.StreamID, version: d.Event.Version, id: d.Event.ID, ok: true}
			e, err := c.targetEvent(ctx, ref)
			if err != nil {
				return fmt.Errorf("storecopy: dead letter %s of consumer %q (stream %q, version %d): %w",
					d.ID, ci.Name, ref.stream, ref.version, err)
			}
			_, err = c.state.toLetters.ParkDeadLetter(ctx, eventstore.DeadLetter{
				ID: d.ID, Consumer: ci.Name, Event: e, Part: d.Part, Error: d.Error, Attempts: d.Attempts,
				FirstFailure: d.FirstFailure, LastFailure: d.LastFailure,
			})
			if err != nil {
				return fmt.Errorf("storecopy: park dead letter %s of consumer %q (stream %q, version %d) in the target: %w",
					d.ID, ci.Name, ref.stream, ref.version, err)
			}
			c.report.DeadLetters++
		}
	}
	return nil
}

// copySnapshots copies the source's snapshots; one that the target holds
// already, alike, is not saved again, so that a rerun changes nothing.
func (c *copier) copySnapshots(ctx context.Context) error {
	for s, err := range c.state.catalog.Snapshots(ctx, "") {
		if err != nil {
			return fmt.Errorf("storecopy: list the source's snapshots: %w", err)
		}
		held, ok, err := c.state.toSnapshots.LoadSnapshot(ctx, s.Stream)
		if err != nil {
			return fmt.Errorf("storecopy: load the snapshot of stream %q in the target: %w", s.Stream, err)
		}
		if ok && held.Version == s.Version && held.Type == s.Type && held.SchemaVersion == s.SchemaVersion && bytes.Equal(held.Data, s.Data) {
			continue
		}
		if err := c.state.toSnapshots.SaveSnapshot(ctx, s); err != nil {
			return fmt.Errorf("storecopy: save the snapshot of stream %q at version %d in the target: %w", s.Stream, s.Version, err)
		}
		c.report.Snapshots++
	}
	return nil
}
