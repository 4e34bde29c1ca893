package testserver

import (
	"bytes"
	"encoding/json"
	"strings"
)

// streamMeta is the part of a stream's metadata ($$stream) that changes
// what reads return. $maxAge, $acl and $cacheControl are accepted and
// ignored.
type streamMeta struct {
	maxCount int64 // -1: unlimited
	tb       int64 // truncate before; -1: none
}

// defaultMeta: a metastream keeps only its last event readable, like the
// server's metastream max count of 1.
func defaultMeta(name string) streamMeta {
	if strings.HasPrefix(name, "$$") {
		return streamMeta{maxCount: 1, tb: -1}
	}
	return streamMeta{maxCount: -1, tb: -1}
}

// softDeleted reports a soft delete: the server marks it with $tb set to
// EventNumber.DeletedStream.
func (m streamMeta) softDeleted() bool { return m.tb == deletedStream }

// firstReadable is the lowest event number a read returns, given the last.
func (m streamMeta) firstReadable(last int64) int64 {
	first := int64(0)
	if m.tb > first {
		first = m.tb
	}
	if m.maxCount >= 0 && last-m.maxCount+1 > first {
		first = last - m.maxCount + 1
	}
	return first
}

// parseMeta reads $maxCount and $tb the way the server does: metadata it
// cannot parse counts as empty. Numbers go through json.Number because $tb
// of a soft delete is 2^63-1, beyond float64's exact range.
func parseMeta(name string, data []byte) streamMeta {
	m := defaultMeta(name)
	var raw map[string]json.RawMessage
	if json.Unmarshal(data, &raw) != nil {
		return m
	}
	if v, ok := metaInt(raw["$maxCount"]); ok && v >= 0 {
		m.maxCount = v
	}
	if v, ok := metaInt(raw["$tb"]); ok && v >= 0 {
		m.tb = v
	}
	return m
}

func metaInt(raw json.RawMessage) (int64, bool) {
	if raw == nil {
		return 0, false
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var n json.Number
	if d.Decode(&n) != nil {
		return 0, false
	}
	v, err := n.Int64()
	return v, err == nil
}

// metaWrittenLocked records that $$name got a new last event.
func (st *store) metaWrittenLocked(name string, data []byte) {
	s := st.ensureLocked(name)
	s.meta = parseMeta(name, data)
	s.rawMeta = data
}

func (st *store) softDeletedLocked(name string) bool {
	s := st.streams[name]
	return s != nil && s.meta.softDeleted()
}

// undeleteLocked is the server's SoftUndeleteStream: after a write to a
// soft-deleted stream it rewrites the stream's metadata with $tb moved to
// the first new event, so the events from before the delete stay hidden and
// the numbering goes on. Metadata it cannot parse is left alone, as there.
func (st *store) undeleteLocked(name string, recreateFrom int64) {
	s := st.streams[name]
	if s == nil {
		return
	}
	var raw map[string]json.RawMessage
	if json.Unmarshal(s.rawMeta, &raw) != nil || raw == nil {
		return
	}
	tb, _ := json.Marshal(recreateFrom)
	raw["$tb"] = tb
	data, err := json.Marshal(raw)
	if err != nil {
		return
	}
	st.systemWriteLocked("$$"+name, "$metadata", data)
}
