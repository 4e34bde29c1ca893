package saga

import (
	"context"
	"log/slog"
	"strings"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/backoff"
)

// The deadline index (and the gap index beside it) learns a record when
// this runner stores it, when its outbox reads it, and when a scan reads
// it. It must be whole with or without leases: every outbox session
// starts at a checkpoint that another process may have moved past records
// this one never read, so each claim first reads what lies between where
// the index was whole and the claimed checkpoint.

// observe tells the runner's indexes (deadlines, what is stuck) of record version
// of instance id: one it stored, or one its outbox read. Only the
// instances of the segments this runner runs are indexed.
func (r *Runner[S]) observe(id string, version uint64, rec *record) {
	r.observeRecord(id, version, rec, false)
}

// observeScanned is observe for a record that a scan of the saga's
// records read, which the steps observed since the scan began override.
func (r *Runner[S]) observeScanned(id string, version uint64, rec *record) {
	r.observeRecord(id, version, rec, true)
}

func (r *Runner[S]) observeRecord(id string, version uint64, rec *record, scanned bool) {
	r.activity.RLock()
	defer r.activity.RUnlock()
	if !r.timers.isActive(Segment(id, r.segments)) {
		return
	}
	r.timers.observe(id, version, rec.Deadlines)
	if scanned {
		r.stuck.observeScanned(id, version, rec)
	} else {
		r.stuck.observe(id, version, rec)
	}
}

// loadDeadlines fills the deadline and stuck indexes of every active
// segment whose index is not known to be whole (never read, or active
// again after Run gave it up) from the latest step of each instance, read
// from the store; when every active segment's is whole, it reads nothing.
func (r *Runner[S]) loadDeadlines(ctx context.Context) error {
	if r.timers.whole() {
		return nil
	}
	return r.scan(ctx, -1, eventstore.Start)
}

// claimedOutbox makes the deadline index whole for segment k, whose
// outbox consumer has claimed its checkpoint at from: the records up to
// from are not read again, and another process may have set deadlines in
// them that this one never saw. Unless this process read that far itself,
// it reads the records it has not read, up to the end of the log, with
// retries (a store error is retried as a handler's failure is).
func (r *Runner[S]) claimedOutbox(ctx context.Context, k int, from eventstore.Position) error {
	for attempt := 1; ; attempt++ {
		err := r.scan(ctx, k, from)
		if err == nil || ctx.Err() != nil || attempt >= r.e.attempts {
			return err
		}
		r.e.log.WarnContext(ctx, "saga: reading the pending deadlines failed; retrying", slog.String("saga", r.e.t.name), slog.Any("error", err))
		if err := backoff.Wait(ctx, r.e.retry.Delay(attempt)); err != nil {
			return err
		}
	}
}

// scan reads the saga's step records from the lowest position where an
// active segment's index is not known to be whole, to the end of the log,
// and tells the indexes what the latest of each instance's records leaves
// pending; the active segments are then whole up to what it read, and
// segment k (when not negative) at least up to from, which its consumer
// claimed before the scan began. Scans run one at a time: one that a
// claim waited for may have covered it already.
func (r *Runner[S]) scan(ctx context.Context, k int, from eventstore.Position) error {
	r.scans.Lock()
	defer r.scans.Unlock()
	if k >= 0 && r.timers.covered(k, from) {
		return nil
	}
	start, epochs := r.timers.plan()
	r.stuck.beginScan()
	last, err := r.scanRecords(ctx, start)
	r.stuck.endScan()
	if err != nil {
		return err
	}
	for seg, epoch := range epochs {
		p := last
		if seg == k && p.Before(from) {
			p = from // the scan read to the end of the log, past the claim
		}
		r.timers.cover(seg, p, epoch)
	}
	return nil
}

// scanRecords reads the saga's step records after position start and
// tells the indexes what the latest record of each instance of an active
// segment leaves pending. A record that cannot be read is reported and
// passed over. It returns the position of the last record read (start
// when none).
func (r *Runner[S]) scanRecords(ctx context.Context, start eventstore.Position) (eventstore.Position, error) {
	type latest struct {
		version uint64
		rec     *record
	}
	found := make(map[string]latest)
	last := start
	f := eventstore.Filter{Types: []string{recordType}, StreamPrefixes: []string{r.e.t.Category()}}
	for ev, err := range r.e.store.ReadAll(ctx, start, f) {
		if err != nil {
			return last, err
		}
		last = ev.Position
		id, _ := strings.CutPrefix(ev.StreamID, r.e.t.Category())
		if !r.timers.isActive(Segment(id, r.segments)) {
			continue // another process fires them
		}
		rec, err := decodeOutline(ev)
		if err != nil {
			r.unreadable(ctx, ev, err)
			continue
		}
		if len(rec.Deadlines) == 0 && len(rec.Held) == 0 && rec.Parked == nil && !r.timers.knows(id) && !r.stuck.knows(id) {
			delete(found, id) // nothing to index, nor to drop from the indexes
			continue
		}
		// Only what the indexes read is kept: the deadlines, the parked
		// message, and the held messages with the progress their gaps are
		// judged by, all without payloads.
		found[id] = latest{version: ev.Version, rec: &record{Deadlines: rec.Deadlines, Held: references(rec.Held),
			Sources: rec.Sources, Parked: parkedReference(rec.Parked)}}
	}
	for id, l := range found {
		r.observeScanned(id, l.version, l.rec)
	}
	return last, nil
}

// references returns held messages without their payloads.
func references(held []envelope) []envelope {
	out := make([]envelope, len(held))
	for i, h := range held {
		out[i] = h.reference()
	}
	return out
}

// parkedReference returns p without its message's payload.
func parkedReference(p *parkedMessage) *parkedMessage {
	if p == nil {
		return nil
	}
	ref := *p
	ref.Message = p.Message.reference()
	return &ref
}
