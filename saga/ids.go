package saga

import "github.com/google/uuid"

// Identity from meaning, not position: the IDs of what a step decides
// derive from the instance, the message it handles and what is sent or
// scheduled (a command's type and target aggregate), never from the step's
// version or a command's place among the step's other commands. A handler
// fixed and re-run by [Runner.Redrive] that adds, drops, reorders or
// changes commands keeps the IDs of those it still sends to the same
// aggregate under the same type; among several commands of one type to one
// aggregate, an ordinal tells them apart, so those keep their IDs as long
// as none is added or dropped before them. A command's payload is not part
// of its ID: a fix that corrects a charge's amount keeps the charge's ID,
// and the bus absorbs it (the first run's charge stands, for the handlers
// to compensate), rather than making the fixed charge beside the wrong one.
// A type's ID is its oldest codec name (see lineageName), so that a rename
// through an upcaster keeps IDs too. Every ID is of fixed size, however
// often a deadline re-arms itself.

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
