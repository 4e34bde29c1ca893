package saga

import "github.com/google/uuid"

// Identity from meaning, not position: the IDs of what a step decides
// derive from the instance, the message it handles and what is sent or
// scheduled, never from an index in the step or the step's version. A
// handler fixed and re-run by [Runner.Redrive] that adds, drops or
// reorders commands keeps the IDs of those it still sends; and every ID is
// of fixed size, however often a deadline re-arms itself.

// commandID is the ID of a command that the step handling the message
// with key sends from stream: from its codec type name and its target
// aggregate, and its ordinal among the step's commands of that type and
// target (0 for the first).
func commandID(stream, key, typeName, target string, ordinal int) string {
	return uuid.NewSHA1(idSpace, []byte(stream+"\x00command/2\x00"+key+"\x00"+typeName+"\x00"+target+"\x00"+uitoa(uint64(ordinal)))).String()
}

// deadlineID identifies one scheduling of the deadline called name: by the
// instance, the message whose step set it and the name. Each message is
// decided once, so a later scheduling of the name has another ID (and an
// earlier timer is recognised as stale); the same message decided again by
// [Runner.Redrive] schedules the same ID, so that the commands of its
// firing keep their IDs too.
func deadlineID(stream, key, name string) string {
	return uuid.NewSHA1(idSpace, []byte(stream+"\x00deadline/2\x00"+key+"\x00"+name)).String()
}
