package storecopy

import (
	"slices"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/google/uuid"
)

// eventRef names a source event by what the copy keeps of it, its stream,
// version and ID, so that its copy can be found in the target, whose
// positions are its own.
type eventRef struct {
	stream  string
	version uint64
	id      uuid.UUID
	ok      bool // false: no event (the start of the log)
}

// translation is a consumer's source checkpoint and the source event it
// maps to: the last source event at or before it (none: the start).
type translation struct {
	consumer string
	at       eventstore.Position // the source checkpoint
	last     eventRef
}

// translator maps consumers' source checkpoints to source events. It is
// fed source events in global order, and resolves each checkpoint P when
// the first event past P arrives (P maps to the event fed before it), or
// at the end (P maps to the last event fed). A checkpoint is a position,
// not necessarily an event's (a filter consumer's names the last event it
// saw, which other streams' events follow), so "the last event at or
// before P" is the mapping that makes the consumer on the target resume
// exactly where it would have resumed on the source: with the first event
// after P.
//
// One translator has two feeders: the events being copied, and, on a
// rerun that resumes past some checkpoints, a read-only scan of the part
// of the source copied before (see copier.scanCopied).
type translator struct {
	pending []translation // sorted by at; pending[next:] unresolved
	next    int
	last    eventRef // the last event fed
	ready   []translation
}

func newTranslator(checkpoints []translation) *translator {
	slices.SortStableFunc(checkpoints, func(a, b translation) int { return a.at.Compare(b.at) })
	return &translator{pending: checkpoints}
}

// feed resolves the checkpoints that e is the first event past, then
// makes e the last event fed.
func (t *translator) feed(e *eventstore.Event) {
	for t.next < len(t.pending) && t.pending[t.next].at.Before(e.Position) {
		t.resolve()
	}
	t.last = eventRef{stream: e.StreamID, version: e.Version, id: e.ID, ok: true}
}

// end resolves every checkpoint left: they are at or past the last event
// fed, which is the source's last.
func (t *translator) end() {
	for t.next < len(t.pending) {
		t.resolve()
	}
}

func (t *translator) resolve() {
	tr := t.pending[t.next]
	tr.last = t.last
	t.ready = append(t.ready, tr)
	t.next++
}

// unresolvedBefore reports whether a checkpoint before p (or any, when p
// is nil) is unresolved.
func (t *translator) unresolvedBefore(p *eventstore.Position) bool {
	return t.next < len(t.pending) && (p == nil || t.pending[t.next].at.Before(*p))
}

// take returns the resolved checkpoints not taken yet.
func (t *translator) take() []translation {
	r := t.ready
	t.ready = nil
	return r
}
