package sqlite

import (
	"errors"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// A group made only of appends takes a faster road than a savepoint per
// append, on the writer's appendConn: the writer reads the state of every
// stream in the group and looks up every caller-chosen event ID, checks each
// append in memory, in queue order, and writes the events of those that
// pass. An append that fails its checks writes nothing, so it needs no
// savepoint to undo; the others commit.
//
// If SQLite fails any statement, the transaction is rolled back and the
// group is run again one savepoint per append (commitEach), so that an
// error that belongs to one append fails only that append.

// storedEvent is where an event ID sits: its version and position.
type storedEvent struct{ version, position uint64 }

// groupStream is what the group knows of one stream: its last version, and
// where it holds the event IDs that the group's appends name, including
// those that earlier appends of the group have just written.
type groupStream struct {
	last    uint64
	exists  bool
	corrupt error
	ids     map[uuid.UUID]storedEvent
}

// idChunk bounds the event IDs looked up per statement.
const idChunk = 64

// commitAppends runs jobs in the transaction open on c. It returns an
// error, with no job finished, when SQLite failed; then the caller rolls
// back and runs the group again one savepoint per job.
func (w *writer) commitAppends(c *appendConn, jobs []*appendJob) error {
	if w.streams == nil {
		w.streams = make(map[string]*groupStream)
	}
	defer clear(w.streams)
	streams := w.streams
	err := groupState(c, jobs, streams)
	if err != nil {
		return err
	}
	recordedAt := w.tx.now.UnixNano()
	for _, j := range jobs {
		st := streams[j.stream]
		if st.corrupt != nil {
			j.err = st.corrupt
			continue
		}
		current := storekit.StreamState(st.last, st.exists)
		if j.callerIDs && len(st.ids) > 0 {
			repeat := storekit.Repeat{Current: current, Stored: make(map[uuid.UUID]uint64)}
			for _, e := range j.events {
				if se, ok := st.ids[e.ID]; ok {
					repeat.Stored[e.ID] = se.version
				}
			}
			first, found, err := storekit.CheckRepeat(j.stream, j.expected, j.events, repeat)
			if err != nil {
				j.err = err
				continue
			}
			if found {
				last := st.ids[j.events[len(j.events)-1].ID]
				j.result = eventstore.AppendResult{FirstVersion: first, LastVersion: last.version,
					Position: eventstore.Position{Major: last.position}, Duplicate: true}
				continue
			}
		}
		if !j.expected.Matches(st.last, st.exists) {
			j.err = &eventstore.WrongVersionError{Stream: j.stream, Expected: j.expected, Actual: current}
			continue
		}
		first := uint64(0)
		if st.exists {
			first = st.last + 1
		}
		var position int64
		for i := range j.events {
			e := &j.events[i]
			version := first + uint64(i)
			if position, err = c.insertEvent(j.stream, version, e, j.extra(i), recordedAt, j.derivedIDs); err != nil {
				return err
			}
			if j.callerIDs && len(jobs) > 1 {
				// Only a later append of the group reads these.
				if st.ids == nil {
					st.ids = make(map[uuid.UUID]storedEvent)
				}
				st.ids[e.ID] = storedEvent{version: version, position: uint64(position)}
			}
		}
		st.last, st.exists = first+uint64(len(j.events))-1, true
		j.result = eventstore.AppendResult{FirstVersion: first, LastVersion: st.last,
			Position: eventstore.Position{Major: uint64(position)}}
	}
	return nil
}

// groupState reads the last version of every stream of the group into
// streams (empty), and where those streams hold the caller-chosen event
// IDs.
func groupState(c *appendConn, jobs []*appendJob, streams map[string]*groupStream) error {
	var ids []uuid.UUID
	for _, j := range jobs {
		if streams[j.stream] == nil {
			st := &groupStream{}
			last, exists, err := c.streamState(j.stream)
			var corrupt *CorruptError
			switch {
			case errors.As(err, &corrupt):
				st.corrupt = err
			case err != nil:
				return err
			}
			st.last, st.exists = last, exists
			streams[j.stream] = st
		}
		if j.callerIDs {
			for i := range j.events {
				ids = append(ids, j.events[i].ID)
			}
		}
	}
	err := c.findIDs(ids, func(stream string, id uuid.UUID, version, position int64) {
		st := streams[stream]
		if st == nil || version < 0 || position <= 0 {
			return // an ID held by a stream outside the group, or a corrupt row
		}
		if st.ids == nil {
			st.ids = make(map[uuid.UUID]storedEvent)
		}
		st.ids[id] = storedEvent{version: uint64(version), position: uint64(position)}
	})
	return err
}
