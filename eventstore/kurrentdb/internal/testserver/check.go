package testserver

import (
	"strings"

	"github.com/google/uuid"
)

// decision is the outcome of the server's commit check.
type decision int

const (
	decideWrite decision = iota
	decideWrongVersion
	decideDeleted
	decideIdempotent
)

// checkResult carries what the check found: the stream's last number (the
// "actual version" of a wrong-version answer), the numbers a repeat already
// holds, and whether the write must undelete a soft-deleted stream.
type checkResult struct {
	decision    decision
	cur         int64
	start, end  int64
	softDeleted bool
}

// checkLocked is KurrentDB's IndexWriter.CheckCommit without its caches:
//
//   - Any and StreamExists look each ID up where it was last written. The
//     first ID unknown in this stream: write. All known in this stream:
//     idempotent, at the numbers they have, without checking their place.
//     Some known and then one not: "corrupted idempotency", answered as a
//     wrong version.
//   - Exact(v) and NoStream (v = -1) with v below the current number compare
//     the IDs with the events at v+1, v+2, ...: all equal is idempotent, the
//     first different is a wrong version (or, for NoStream on a soft-deleted
//     stream, a write that recreates it), a later different is again
//     corrupted idempotency.
//   - v equal to the current number writes, with no ID check at all; v above
//     it is a wrong version.
//
// The server looks IDs up for Any and StreamExists only in an in-memory
// cache, bounded and empty after a restart, so on a real node the first rule
// is best effort and a late repeat is written again. Here the cache is
// unbounded; Restart and ForgetEventIDs empty it, so that a test can show an
// adapter does not lean on it. The Exact rule reads the stored events and
// never forgets.
func (st *store) checkLocked(name string, expected int64, ids []uuid.UUID) checkResult {
	cur := st.lastNumberLocked(name)
	if cur == deletedStream {
		return checkResult{decision: decideDeleted, cur: cur}
	}
	wrong := checkResult{decision: decideWrongVersion, cur: cur}
	if expected == expectStreamExists {
		if st.softDeletedLocked(name) {
			return checkResult{decision: decideDeleted, cur: cur}
		}
		// A stream that has only metadata exists.
		if cur < 0 && st.lastNumberLocked("$$"+name) < 0 {
			return wrong
		}
	}

	if expected == expectAny || expected == expectStreamExists {
		start, end := int64(-1), int64(-1)
		for i, id := range ids {
			ref, ok := st.ids[id]
			if !ok || ref.stream != name {
				if i == 0 {
					return checkResult{decision: decideWrite, cur: cur, softDeleted: st.softDeletedLocked(name)}
				}
				return wrong
			}
			if i == 0 {
				start = ref.rev
			}
			end = ref.rev
		}
		if len(ids) == 0 {
			return checkResult{decision: decideWrite, cur: cur, softDeleted: st.softDeletedLocked(name)}
		}
		return checkResult{decision: decideIdempotent, cur: cur, start: start, end: end}
	}

	if expected < cur {
		events := st.streams[name].events
		n := expected
		for _, id := range ids {
			n++
			if n <= cur && events[n].id == id {
				continue
			}
			if n != expected+1 {
				return wrong
			}
			if expected == expectNoStream && st.softDeletedLocked(name) {
				return checkResult{decision: decideWrite, cur: cur, softDeleted: true}
			}
			return wrong
		}
		if n == expected { // an empty append cannot repeat anything
			return wrong
		}
		return checkResult{decision: decideIdempotent, cur: cur, start: expected + 1, end: n}
	}
	if expected > cur {
		return wrong
	}
	return checkResult{decision: decideWrite, cur: cur, softDeleted: st.softDeletedLocked(name)}
}

// appendOutcome is what the gRPC layer answers.
type appendOutcome struct {
	decision decision
	cur      int64     // the stream's last number, for a wrong version
	last     int64     // success: the last number written or repeated
	pos      *position // success: that event's position; nil if none
}

// appendEvents runs one append request the way the server's storage writer
// does, and wakes subscriptions when it wrote.
func (st *store) appendEvents(name string, expected int64, evs []proposed) appendOutcome {
	ids := make([]uuid.UUID, len(evs))
	for i, e := range evs {
		ids[i] = e.id
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	chk := st.checkLocked(name, expected, ids)
	switch chk.decision {
	case decideWrongVersion, decideDeleted:
		return appendOutcome{decision: chk.decision, cur: chk.cur}
	case decideIdempotent:
		pos := st.streams[name].events[chk.end].pos
		return appendOutcome{decision: decideIdempotent, cur: chk.cur, last: chk.end, pos: &pos}
	}

	// Writing to $$X of a soft-deleted X undeletes X too (checked before the
	// write changes X's metadata), as the server's SoftUndeleteMetastream.
	orig, isMeta := metastreamOf(name)
	undeleteOrig := isMeta && st.softDeletedLocked(orig) && st.lastNumberLocked(orig) != deletedStream

	recs := st.writeLocked(name, chk.cur, evs)
	if chk.softDeleted {
		st.undeleteLocked(name, chk.cur+1)
	}
	if undeleteOrig {
		st.undeleteLocked(orig, st.lastNumberLocked(orig)+1)
	}
	st.noteAppendLocked()
	st.publishLocked()

	out := appendOutcome{decision: decideWrite, cur: chk.cur, last: chk.cur}
	if len(recs) > 0 {
		last := recs[len(recs)-1]
		out.last, out.pos = last.rev, &last.pos
	}
	return out
}

// metastreamOf gives X for "$$X".
func metastreamOf(name string) (string, bool) {
	return strings.CutPrefix(name, "$$")
}
